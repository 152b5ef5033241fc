import type { Telemetry } from "../../../ports/telemetry.js";
import { MONEY, newOperationId, type Operation, type Outcome, type Pending } from "./account-state.js";

/** Operations folded into one conditional write. */
export const MAX_BATCH = 128;
/** Rounds whose sizes set what the next round waits for. */
const REMEMBERED_ROUNDS = 8;
/** The longest a round waits for operations to gather: never more than half the last round took. */
const MAX_GATHER_MS = 5;

/**
 * When a round may wait for operations still on their way. A round carries
 * what queued while the last one ran; callers whose answers travel further
 * (on a slower path) ask again a moment after the others, and without
 * waiting they would miss the next round and ride the one after, alone: an
 * account's callers split into groups that take turns, and each round
 * carries only a part of them. So a round that would carry fewer operations
 * than the largest of the last REMEMBERED_ROUNDS waits until that many have
 * queued, for at most half as long as the last round took (and
 * MAX_GATHER_MS): a round half as full costs a whole round. Callers that ask
 * one at a time never wait (the largest recent round is theirs), and a load
 * that shrinks stops waiting after REMEMBERED_ROUNDS rounds.
 */
export class RoundSizes {
  private readonly sizes: number[] = [];
  private lastMs = 0;

  ended(operations: number, ms: number): void {
    this.sizes.push(operations);
    if (this.sizes.length > REMEMBERED_ROUNDS) this.sizes.shift();
    this.lastMs = ms;
  }

  /** What the next round should wait for, given the operations queued now; undefined to start at once. */
  gatherFor(queued: number): { target: number; ms: number } | undefined {
    const target = Math.min(MAX_BATCH, Math.max(0, ...this.sizes));
    const ms = Math.min(MAX_GATHER_MS, this.lastMs / 2);
    return queued < target && ms >= 1 ? { target, ms } : undefined;
  }
}

/** What the queue runs a batch with: one round (a conditional write), then the answers. */
export interface RoundRunner {
  /** Commits the batch in one round; its outcomes, one per operation. A throw fails the whole batch. */
  commit(accountId: string, batch: readonly Pending[]): Promise<Outcome[]>;
  /** Answers the batch's callers from the round's outcomes. */
  answer(accountId: string, batch: readonly Pending[], outcomes: readonly Outcome[]): Promise<void>;
}

/**
 * The group commit: within a process, operations on one account queue, and
 * each round takes up to MAX_BATCH of them into one write, so a hot account
 * is limited by round trips, not by contention. One account's rounds run one
 * after another; different accounts' run side by side.
 */
export class GroupCommitQueue {
  private readonly queues = new Map<string, Pending[]>();
  /** Per account: the queue length its next round is waiting for, and how to start it (see RoundSizes). */
  private readonly gathering = new Map<string, { target: number; done(): void }>();

  constructor(private readonly rounds: RoundRunner, private readonly telemetry: Telemetry) {}

  enqueue(accountId: string, operation: Operation): Promise<Outcome> {
    return new Promise((resolve, reject) => {
      if ("reservationId" in operation && operation.reservationId === MONEY) return reject(new Error("a reservation id is never empty (it names the money row)"));
      const queue = this.queues.get(accountId);
      const pending = { id: newOperationId(), operation, resolve, reject };
      if (queue) {
        queue.push(pending);
        const gathering = this.gathering.get(accountId);
        if (gathering && queue.length >= gathering.target) gathering.done();
        return;
      }
      this.queues.set(accountId, [pending]);
      // Wait one turn of the event loop so that operations arriving together share the first round too.
      setImmediate(() => void this.drain(accountId));
    });
  }

  private async drain(accountId: string): Promise<void> {
    const queue = this.queues.get(accountId)!;
    const sizes = new RoundSizes();
    while (queue.length > 0) {
      const wait = sizes.gatherFor(queue.length);
      if (wait) await this.gather(accountId, wait.target, wait.ms);
      const batch = queue.splice(0, MAX_BATCH);
      const started = performance.now();
      let outcomes: Outcome[];
      try {
        outcomes = await this.rounds.commit(accountId, batch);
      } catch (error) {
        for (const pending of batch) pending.reject(error);
        continue;
      } finally {
        const ms = performance.now() - started;
        sizes.ended(batch.length, ms);
        this.telemetry.observe({ kind: "ledger_round", operations: batch.length, seconds: ms / 1000 });
      }
      await this.rounds.answer(accountId, batch, outcomes);
      // One turn for the callers just answered to ask again: they join the next round instead of following it alone.
      await new Promise(setImmediate);
    }
    this.queues.delete(accountId);
  }

  /** Waits until the account's queue holds `target` operations, or `ms` have passed. */
  private gather(accountId: string, target: number, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.gathering.delete(accountId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.gathering.set(accountId, { target, done });
    });
  }
}
