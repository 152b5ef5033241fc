import type { Money } from "../../domain/money.js";
import type { HoldEnd, IntentHolds } from "../../ports/intent-holds.js";
import type { ReserveOptions, ReserveOutcome, Settlement } from "../../ports/ledger.js";
import type { GroupedWrites } from "./grouped-writes.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import type { SqliteJobStore } from "./sqlite-job-store.js";
import type { SqliteLedger } from "./sqlite-ledger.js";

/**
 * An intent and its hold in one write of the embedded file: the ledger's
 * reservation, and the intent listed as unfinished only when it reserved.
 * Likewise the end of a hold and of its intent (a text stream's last write).
 * Both run in the store's group commit (GroupedWrites): the text calls whose
 * holds are asked for during one turn of the event loop share one commit, as
 * acceptances do: a commit alone (its BEGIN, the WAL's frames one pwrite
 * each, the WAL locks, COMMIT) is most of a stream's SQLite time where
 * syscalls are dear (decision 0023).
 */
export class SqliteIntentHolds implements IntentHolds {
  private readonly reserveWrite: (
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ) => ReserveOutcome;

  private readonly endWrite: (intentId: string, reservationId: string, end: HoldEnd) => Settlement | undefined;

  /** endWrite as a transaction of its own, for an end the group could not commit. */
  private readonly endAlone: (intentId: string, reservationId: string, end: HoldEnd) => Settlement | undefined;

  constructor(db: SqliteDb, jobs: SqliteJobStore, ledger: SqliteLedger, private readonly writes: GroupedWrites) {
    this.reserveWrite = (intentId, accountId, since, reservationId, amount, options) => {
      const outcome = ledger.reserveNow(accountId, reservationId, amount, options);
      if (outcome === "reserved") jobs.registerIntentNow(intentId, accountId, since);
      return outcome;
    };
    this.endWrite = (intentId, reservationId, end) => {
      const settlement = "release" in end
        ? ledger.endNow(reservationId, "released", 0n, undefined, end.release)
        : ledger.endNow(reservationId, "settled", end.charge, end.tokens);
      jobs.markFinalizedNow(intentId);
      return "release" in end ? undefined : settlement;
    };
    this.endAlone = db.transaction(this.endWrite).immediate;
  }

  /**
   * An end that its group could not commit is tried once more in a
   * transaction of its own: the group is refused once the store stops taking
   * writes (it is closing, while streams cut by the shutdown still end), and
   * a write that breaks the whole transaction (a full disk) fails every write
   * of its group. Delivered output is owed, so its settlement gets its own
   * chance; ending a hold is idempotent, and a group that failed kept
   * nothing, so the second try moves the money at most once.
   */
  async endAndFinalize(intentId: string, _accountId: string, reservationId: string, end: HoldEnd): Promise<Settlement | undefined> {
    try {
      return await this.writes.run(() => this.endWrite(intentId, reservationId, end));
    } catch {
      return sqliteCall(() => this.endAlone(intentId, reservationId, end));
    }
  }

  registerAndReserve(
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ): Promise<ReserveOutcome> {
    return this.writes.run(() => this.reserveWrite(intentId, accountId, since, reservationId, amount, options));
  }
}
