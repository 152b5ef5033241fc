import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Money } from "../../domain/money.js";
import { boundedCharge, countsAsOpenHold } from "../../domain/pricing/settlement.js";
import type { BalanceSnapshot, Ledger, ReserveOptions, ReserveOutcome, Settlement, Shortfall } from "../../ports/ledger.js";
import { AmbiguousWriteError, conditional, serialRead, type CassandraClient } from "./cassandra-session.js";

type Operation =
  | { kind: "reserve"; reservationId: string; amount: Money; options?: ReserveOptions }
  | { kind: "settle"; reservationId: string; amount: Money }
  | { kind: "release"; reservationId: string }
  | { kind: "credit"; amount: Money };

/**
 * A settle that ended its hold answers its Settlement; one that found no hold
 * "no_hold" (turned into the settlement recorded before, or nothing, by
 * `repeatsResolved`); the rest "done".
 */
type Outcome = ReserveOutcome | "done" | "no_hold" | Settlement;

interface Pending {
  readonly id: string;
  readonly operation: Operation;
  resolve(outcome: Outcome): void;
  reject(error: unknown): void;
}

interface AccountState {
  balance: Money;
  reserved: Money;
  holds: Map<string, Money>;
  version: bigint;
  lastOps: string[];
}

/**
 * Operation ids remembered per account to resolve writes of unknown outcome:
 * enough for several full batches of other writers to land between a timed-out
 * write and the re-read that looks for it.
 */
const REMEMBERED_OPS = 2048;
/** Operations folded into one conditional write. */
const MAX_BATCH = 128;
const MAX_ATTEMPTS = 60;

/**
 * The ledger on Cassandra. An account is one row changed only by
 * `UPDATE ... IF version = ?`. Within a process, operations on one account
 * queue and are group-committed: one read and one Paxos round apply a whole
 * batch, so a hot account is limited by round trips, not by contention. Across
 * processes the version check keeps every batch serial; a loser re-reads and
 * retries. A write of unknown outcome is settled by reading the account's
 * recent operation ids, never by writing again blindly. The open holds are in
 * the row, so a reservation's open-hold limit is checked in the same round as
 * its funds; a settlement charges at most hold + available and records the
 * rest in the row's `shortfalls` by the same write. That map is also what a
 * repeated settle answers from (see resolveRepeats).
 */
export class CassandraLedger implements Ledger {
  private readonly queues = new Map<string, Pending[]>();

  constructor(private readonly client: CassandraClient) {}

  async createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    const result = await conditional(
      this.client,
      "INSERT INTO accounts (account_id, name, balance, reserved, holds, version, last_ops, created_at) VALUES (?, ?, ?, 0, {}, 0, [], ?) IF NOT EXISTS",
      [accountId, name, initialBalance, new Date()],
    );
    if (!result.applied) throw new Error(`account ${accountId} exists`);
  }

  async credit(accountId: string, amount: Money): Promise<BalanceSnapshot | undefined> {
    const outcome = await this.enqueue(accountId, { kind: "credit", amount });
    return outcome === "unknown_account" ? undefined : this.balance(accountId);
  }

  async balance(accountId: string): Promise<BalanceSnapshot | undefined> {
    const row = (await this.client.execute("SELECT balance, reserved FROM accounts WHERE account_id = ?", [accountId])).first();
    return row ? { balance: row.balance as bigint, reserved: row.reserved as bigint } : undefined;
  }

  async reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome> {
    return (await this.enqueue(accountId, { kind: "reserve", reservationId, amount, options })) as ReserveOutcome;
  }

  async settle(accountId: string, reservationId: string, amount: Money): Promise<Settlement | undefined> {
    const outcome = await this.enqueue(accountId, { kind: "settle", reservationId, amount });
    return typeof outcome === "object" ? outcome : undefined;
  }

  async release(accountId: string, reservationId: string): Promise<void> {
    await this.enqueue(accountId, { kind: "release", reservationId });
  }

  async shortfalls(accountId: string): Promise<Shortfall[]> {
    const row = (await this.client.execute("SELECT shortfalls FROM accounts WHERE account_id = ?", [accountId])).first();
    const recorded = (row?.shortfalls as Record<string, bigint> | null | undefined) ?? {};
    return Object.entries(recorded).map(([reservationId, amount]) => ({ reservationId, amount }));
  }

  async hasAnyAccount(): Promise<boolean> {
    return (await this.client.execute("SELECT account_id FROM accounts LIMIT 1")).rowLength > 0;
  }

  private enqueue(accountId: string, operation: Operation): Promise<Outcome> {
    return new Promise((resolve, reject) => {
      const queue = this.queues.get(accountId);
      const pending = { id: randomUUID(), operation, resolve, reject };
      if (queue) {
        queue.push(pending);
        return;
      }
      this.queues.set(accountId, [pending]);
      // Wait one turn of the event loop so that operations arriving together share the first round too.
      setImmediate(() => void this.drain(accountId));
    });
  }

  private async drain(accountId: string): Promise<void> {
    const queue = this.queues.get(accountId)!;
    while (queue.length > 0) {
      const batch = queue.splice(0, MAX_BATCH);
      let outcomes: Outcome[];
      try {
        outcomes = await this.commit(accountId, batch);
      } catch (error) {
        for (const pending of batch) pending.reject(error);
        continue;
      }
      await this.resolveRepeats(accountId, batch, outcomes);
    }
    this.queues.delete(accountId);
  }

  /**
   * Answers the batch. A settle that found its hold already ended is a repeat
   * (the reaper after a crash): it answers the settlement recorded, which the
   * row keeps for a capped settlement (its shortfall: amount asked − shortfall
   * was charged); otherwise undefined (a settlement in full charged the amount
   * asked; or the hold was released, or never taken). A failure to read that
   * fails those settles only: the others' outcomes are known.
   */
  private async resolveRepeats(accountId: string, batch: readonly Pending[], outcomes: readonly Outcome[]): Promise<void> {
    let recorded: Record<string, bigint> | undefined;
    let readError: unknown;
    if (outcomes.includes("no_hold")) {
      try {
        const row = await serialRead(this.client, "SELECT shortfalls FROM accounts WHERE account_id = ?", [accountId]);
        recorded = (row?.shortfalls as Record<string, bigint> | null | undefined) ?? {};
      } catch (error) {
        readError = error;
      }
    }
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      if (outcome !== "no_hold") return pending.resolve(outcome);
      if (!recorded) return pending.reject(readError);
      const operation = pending.operation as Extract<Operation, { kind: "settle" }>;
      const shortfall = recorded[operation.reservationId];
      if (shortfall === undefined) return pending.resolve("done");
      const charged = operation.amount > shortfall ? operation.amount - shortfall : 0n;
      pending.resolve({ charged, shortfall, repeated: true });
    });
  }

  private async read(accountId: string): Promise<AccountState | undefined> {
    const row = await serialRead(
      this.client,
      "SELECT balance, reserved, holds, version, last_ops FROM accounts WHERE account_id = ?",
      [accountId],
    );
    if (!row) return undefined;
    return {
      balance: row.balance as bigint,
      reserved: row.reserved as bigint,
      holds: new Map(Object.entries((row.holds as Record<string, bigint> | null) ?? {})),
      version: row.version as bigint,
      lastOps: (row.last_ops as string[] | null) ?? [],
    };
  }

  /**
   * Applies the batch to a copy of the state; returns each operation's
   * outcome, the ids of the operations that changed something, and the
   * shortfalls the batch's settlements recorded.
   */
  private static apply(
    state: AccountState, batch: readonly Pending[],
  ): { outcomes: Outcome[]; changed: string[]; shortfalls: Record<string, Money> } {
    const outcomes: Outcome[] = [];
    const changed: string[] = [];
    const shortfalls: Record<string, Money> = {};
    for (const { id, operation } of batch) {
      switch (operation.kind) {
        case "reserve": {
          const cap = operation.options?.maxOpenHolds;
          if (state.holds.has(operation.reservationId)) {
            outcomes.push("reserved");
          } else if (cap && CassandraLedger.openHolds(state, cap.countedPrefix, cap.exceptPrefix) >= cap.limit) {
            outcomes.push("too_many_open_holds");
          } else if (state.balance - state.reserved < operation.amount) {
            outcomes.push("insufficient_funds");
          } else {
            state.holds.set(operation.reservationId, operation.amount);
            state.reserved += operation.amount;
            outcomes.push("reserved");
            changed.push(id);
          }
          break;
        }
        case "settle":
        case "release": {
          const held = state.holds.get(operation.reservationId);
          if (held === undefined) {
            outcomes.push(operation.kind === "settle" ? "no_hold" : "done");
            break;
          }
          // Bounded before the hold leaves `reserved`: at most hold + available is charged.
          const settlement = operation.kind === "settle" ? boundedCharge(operation.amount, held, state) : undefined;
          state.holds.delete(operation.reservationId);
          state.reserved -= held;
          if (settlement) {
            state.balance -= settlement.charged;
            if (settlement.shortfall > 0n) shortfalls[operation.reservationId] = settlement.shortfall;
          }
          changed.push(id);
          outcomes.push(settlement ?? "done");
          break;
        }
        case "credit":
          state.balance += operation.amount;
          changed.push(id);
          outcomes.push("done");
          break;
      }
    }
    return { outcomes, changed, shortfalls };
  }

  private static openHolds(state: AccountState, countedPrefix: string, exceptPrefix?: string): number {
    let open = 0;
    for (const id of state.holds.keys()) if (countsAsOpenHold(id, countedPrefix, exceptPrefix)) open++;
    return open;
  }

  private async commit(accountId: string, batch: readonly Pending[]): Promise<Outcome[]> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const state = await this.read(accountId);
      if (!state) return batch.map(() => "unknown_account");
      if (batch.some((p) => state.lastOps.includes(p.id))) {
        // An earlier attempt of this very batch was applied after all (unknown outcome).
        return this.replay(accountId, batch, state);
      }
      const before = state.version;
      const { outcomes, changed, shortfalls } = CassandraLedger.apply(state, batch);
      if (changed.length === 0) return outcomes;
      const lastOps = [...changed, ...state.lastOps].slice(0, REMEMBERED_OPS);
      const params = [state.balance, state.reserved, Object.fromEntries(state.holds), before + 1n, lastOps];
      const shortfallsRecorded = Object.keys(shortfalls).length > 0;
      try {
        // Shortfalls are added to the row by the same conditional write that charges.
        const result = shortfallsRecorded
          ? await conditional(
            this.client,
            "UPDATE accounts SET balance = ?, reserved = ?, holds = ?, version = ?, last_ops = ?, shortfalls = shortfalls + ? WHERE account_id = ? IF version = ?",
            [...params, shortfalls, accountId, before],
          )
          : await conditional(
            this.client,
            "UPDATE accounts SET balance = ?, reserved = ?, holds = ?, version = ?, last_ops = ? WHERE account_id = ? IF version = ?",
            [...params, accountId, before],
          );
        if (result.applied) return outcomes;
      } catch (error) {
        if (!(error instanceof AmbiguousWriteError)) throw error;
        // Loop: the next serial read completes any in-flight round and tells via last_ops.
      }
      await sleep(Math.floor(Math.random() * Math.min(50, 2 + attempt * 5)));
    }
    throw new Error(`account ${accountId}: too much contention, gave up after ${MAX_ATTEMPTS} attempts`);
  }

  /**
   * The batch was applied by an attempt whose answer was lost. Recomputing its
   * outcomes against today's state would be wrong; a reserve succeeded exactly
   * when its hold is there (its owner is waiting here, so nobody settled it yet),
   * and a settle ended its hold exactly when its operation id was recorded, with
   * the shortfall the row recorded for its reservation.
   */
  private async replay(accountId: string, batch: readonly Pending[], state: AccountState): Promise<Outcome[]> {
    const settled = batch.some((p) => p.operation.kind === "settle" && state.lastOps.includes(p.id));
    const row = settled ? await serialRead(this.client, "SELECT shortfalls FROM accounts WHERE account_id = ?", [accountId]) : undefined;
    const recorded = (row?.shortfalls as Record<string, bigint> | null | undefined) ?? {};
    return batch.map(({ id, operation }): Outcome => {
      switch (operation.kind) {
        case "reserve":
          if (state.holds.has(operation.reservationId)) return "reserved";
          // Refused: for the open-hold limit or for funds; a refusal of either kind reserved nothing.
          return operation.options?.maxOpenHolds &&
            CassandraLedger.openHolds(state, operation.options.maxOpenHolds.countedPrefix, operation.options.maxOpenHolds.exceptPrefix) >=
              operation.options.maxOpenHolds.limit
            ? "too_many_open_holds"
            : "insufficient_funds";
        case "settle": {
          if (!state.lastOps.includes(id)) return "no_hold"; // it found no hold: a repeat
          const shortfall = recorded[operation.reservationId] ?? 0n;
          return { charged: operation.amount - shortfall, shortfall };
        }
        default:
          return "done";
      }
    });
  }
}
