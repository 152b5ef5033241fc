import type { Money } from "../../domain/money.js";
import type { HoldEnd, IntentHolds } from "../../ports/intent-holds.js";
import type { ReserveOptions, ReserveOutcome, Settlement } from "../../ports/ledger.js";
import type { SqliteDb } from "./sqlite-database.js";
import { sqliteCall } from "./sqlite-errors.js";
import type { SqliteJobStore } from "./sqlite-job-store.js";
import type { SqliteLedger } from "./sqlite-ledger.js";

/**
 * An intent and its hold in one IMMEDIATE transaction of the embedded file:
 * the ledger's reservation (its own transaction, a savepoint here), and the
 * intent listed as unfinished only when it reserved. The issue-13 profile of
 * a text stream found these two commits before the upstream call; an
 * acceptance makes one commit fewer too. Likewise the end of a hold and of
 * its intent (a text stream's last two commits).
 */
export class SqliteIntentHolds implements IntentHolds {
  private readonly transaction: (
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ) => ReserveOutcome;

  private readonly ending: (intentId: string, reservationId: string, end: HoldEnd) => Settlement | undefined;

  constructor(db: SqliteDb, jobs: SqliteJobStore, ledger: SqliteLedger) {
    this.transaction = db.transaction((intentId, accountId, since, reservationId, amount, options) => {
      const outcome = ledger.reserveNow(accountId, reservationId, amount, options);
      if (outcome === "reserved") jobs.registerIntentNow(intentId, accountId, since);
      return outcome;
    }).immediate;
    this.ending = db.transaction((intentId: string, reservationId: string, end: HoldEnd) => {
      const settlement = end === "release"
        ? ledger.endNow(reservationId, "released", 0n)
        : ledger.endNow(reservationId, "settled", end.charge, end.tokens);
      jobs.markFinalizedNow(intentId);
      return end === "release" ? undefined : settlement;
    }).immediate;
  }

  async endAndFinalize(intentId: string, reservationId: string, end: HoldEnd): Promise<Settlement | undefined> {
    return sqliteCall(() => this.ending(intentId, reservationId, end));
  }

  async registerAndReserve(
    intentId: string, accountId: string, since: Date, reservationId: string, amount: Money, options: ReserveOptions,
  ): Promise<ReserveOutcome> {
    return sqliteCall(() => this.transaction(intentId, accountId, since, reservationId, amount, options));
  }
}
