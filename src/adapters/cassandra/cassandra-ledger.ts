import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Money } from "../../domain/money.js";
import type { BalanceSnapshot, Ledger, ReserveOutcome } from "../../ports/ledger.js";
import { AmbiguousWriteError, conditional, serialRead, type CassandraClient } from "./cassandra-session.js";

type Operation =
  | { kind: "reserve"; reservationId: string; amount: Money }
  | { kind: "settle"; reservationId: string; amount: Money }
  | { kind: "release"; reservationId: string }
  | { kind: "credit"; amount: Money };

type Outcome = ReserveOutcome | "done";

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
 * recent operation ids, never by writing again blindly.
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

  async reserve(accountId: string, reservationId: string, amount: Money): Promise<ReserveOutcome> {
    return (await this.enqueue(accountId, { kind: "reserve", reservationId, amount })) as ReserveOutcome;
  }

  async settle(accountId: string, reservationId: string, amount: Money): Promise<void> {
    await this.enqueue(accountId, { kind: "settle", reservationId, amount });
  }

  async release(accountId: string, reservationId: string): Promise<void> {
    await this.enqueue(accountId, { kind: "release", reservationId });
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
      try {
        const outcomes = await this.commit(accountId, batch);
        batch.forEach((pending, i) => pending.resolve(outcomes[i]!));
      } catch (error) {
        for (const pending of batch) pending.reject(error);
      }
    }
    this.queues.delete(accountId);
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

  /** Applies the batch to a copy of the state; returns each operation's outcome and whether anything changed. */
  private static apply(state: AccountState, batch: readonly Pending[]): { outcomes: Outcome[]; changed: string[] } {
    const outcomes: Outcome[] = [];
    const changed: string[] = [];
    for (const { id, operation } of batch) {
      switch (operation.kind) {
        case "reserve": {
          if (state.holds.has(operation.reservationId)) {
            outcomes.push("reserved");
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
          if (held !== undefined) {
            state.holds.delete(operation.reservationId);
            state.reserved -= held;
            if (operation.kind === "settle") state.balance -= operation.amount;
            changed.push(id);
          }
          outcomes.push("done");
          break;
        }
        case "credit":
          state.balance += operation.amount;
          changed.push(id);
          outcomes.push("done");
          break;
      }
    }
    return { outcomes, changed };
  }

  private async commit(accountId: string, batch: readonly Pending[]): Promise<Outcome[]> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const state = await this.read(accountId);
      if (!state) return batch.map(() => "unknown_account");
      if (batch.some((p) => state.lastOps.includes(p.id))) {
        // An earlier attempt of this very batch was applied after all (unknown outcome).
        return CassandraLedger.replay(batch, state);
      }
      const before = state.version;
      const { outcomes, changed } = CassandraLedger.apply(state, batch);
      if (changed.length === 0) return outcomes;
      const lastOps = [...changed, ...state.lastOps].slice(0, REMEMBERED_OPS);
      try {
        const result = await conditional(
          this.client,
          "UPDATE accounts SET balance = ?, reserved = ?, holds = ?, version = ?, last_ops = ? WHERE account_id = ? IF version = ?",
          [state.balance, state.reserved, Object.fromEntries(state.holds), before + 1n, lastOps, accountId, before],
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
   * when its hold is there (its owner is waiting here, so nobody settled it yet).
   */
  private static replay(batch: readonly Pending[], state: AccountState): Outcome[] {
    return batch.map((p) =>
      p.operation.kind === "reserve" ? (state.holds.has(p.operation.reservationId) ? "reserved" : "insufficient_funds") : "done",
    );
  }
}
