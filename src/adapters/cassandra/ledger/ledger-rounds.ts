import { setTimeout as sleep } from "node:timers/promises";
import type { Telemetry } from "../../../ports/telemetry.js";
import { DependencyUnavailableError } from "../../../ports/dependency.js";
import { AmbiguousWriteError, conditional, conditionalBatch, type CassandraClient } from "../cassandra-session.js";
import { dayOf, ruleKey, stateAfterLoss, type AccountState, type Journal, type Operation, type Outcome, type Pending } from "./account-state.js";
import type { RoundRunner } from "./group-commit.js";
import { apply, madeBy, replayedOutcomes, type Applied } from "./ledger-rules.js";
import { holdWrites, moneyRowWrite, type LedgerRows } from "./ledger-rows.js";
import type { LedgerStatement } from "./ledger-statement.js";
import type { BalanceAlertIndex } from "./balance-alerts.js";
import { WrittenRows } from "./written-rows.js";

const MAX_ATTEMPTS = 60;

/** A random pause after a lost round, longer the more rounds were lost (at most 50 ms). */
const backOff = (attempt: number) => sleep(Math.floor(Math.random() * Math.min(50, 2 + attempt * 5)));

/** An attempt whose answer was lost: the version it would have written, and the day of its entries. */
interface LostAttempt {
  readonly version: bigint;
  readonly day: number;
}

/** How a round's conditional write went: applied; lost to another writer (with the rows it found, when they came back); or of unknown outcome. */
type WriteResult = { kind: "applied" } | { kind: "conflict"; found: AccountState | undefined } | { kind: "unknown"; lost: LostAttempt | undefined };

/**
 * An account's rounds: a batch of its operations judged by the ledger's
 * rules (ledger-rules.ts) and written in one conditional write (the money
 * row `IF version = ?`, with the hold rows it adds and ends). A round starts
 * from the row this process's last round wrote (no read) and reads only the
 * hold rows it names and does not know; a reservation's new id is not read
 * but written IF NOT EXISTS. Across processes the version check keeps every
 * batch serial, and a loser is judged again on the rows its lost write found.
 * A write of unknown outcome is settled by reading: its operations' entries
 * are in the journal of the version it would have written, or it was not
 * applied; never by writing again blindly (replay).
 */
export class LedgerRounds implements RoundRunner {
  /**
   * Per account: the money row as this process's last round wrote it, and
   * the holds it knows. The next round starts from it instead of reading the
   * row again (a serial read is a Paxos round of its own); a round that finds
   * the row changed by another writer (its version check fails) reads it.
   */
  private readonly written: WrittenRows;

  constructor(
    private readonly client: CassandraClient,
    private readonly rows: LedgerRows,
    private readonly statement: LedgerStatement,
    private readonly now: () => number,
    private readonly telemetry: Telemetry,
    maxWrittenHolds: number,
    /** Where a crossing round announces its balance.low alerts before writing them (balance-alerts.ts). */
    private readonly alerts?: BalanceAlertIndex,
  ) {
    this.written = new WrittenRows(maxWrittenHolds);
  }

  async commit(accountId: string, batch: readonly Pending[]): Promise<Outcome[]> {
    let readReservations = false;
    /** The account as the last lost round found it (as fresh as a serial read). */
    let found: AccountState | undefined;
    let lost: LostAttempt | undefined;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // Taken out while the round runs: put back only as the row this round leaves.
      const known = this.written.take(accountId);
      const state = found ?? known ?? (await this.rows.read(accountId));
      found = undefined;
      if (!state) return batch.map(() => "unknown_account");
      if (lost) {
        // Read serially after the loss (a serial read completes any round in flight): the attempt's fate is decided.
        const journal = await this.journalOf(accountId, state, lost.version, lost.day);
        lost = undefined;
        if (journal && madeBy(journal, batch).size > 0) {
          this.telemetry.observe({ kind: "ledger_outcome_resolved" });
          return this.replay(accountId, batch, state, journal);
        }
      }
      const prepared = await this.prepare(accountId, state, batch, readReservations);
      if (prepared === "stale") {
        // Another writer changed the account while this round read it: as a lost round.
        this.telemetry.observe({ kind: "ledger_conflict" });
        await backOff(attempt);
        continue;
      }
      const before = state.version;
      // The journal this write replaces must be in ledger_rounds first (its writer may have died before copying it).
      const previous = state.journal;
      if (previous) await this.statement.ensureCopied(accountId, previous);
      const applied = apply(state, batch, this.now());
      if (applied.unsure.length > 0) {
        // A refusal of a reservation whose hold may be open (a repeat): judged again with its hold row read.
        readReservations = true;
        continue;
      }
      // A rule counted from pages read one after another is proved by this round's write: written even when nothing else is.
      if (applied.changed.length === 0 && prepared === "ready") {
        // Nothing to write, so no version check would tell whether the row this was judged on is still the row:
        // a refusal judged on the row this process last wrote is judged again on the row as read now.
        if (state === known) continue;
        this.written.keep(accountId, state);
        return applied.outcomes;
      }
      const result = await this.write(accountId, state, before, applied);
      if (result.kind === "applied") return applied.outcomes;
      if (result.kind === "conflict") {
        // The next round starts from the rows this one found (no read), knowing the holds it named.
        found = result.found;
        // At once: what the lost round found ages with every pause, and the winner keeps writing.
        if (found) continue;
      } else {
        // The next round reads serially, which completes this write if it is in flight, and looks for its entries.
        lost = result.lost;
      }
      await backOff(attempt);
    }
    // Other writers won every round: a moment's overload of this account, not a fault (503 with Retry-After, never 500).
    throw new DependencyUnavailableError("cassandra", `account ${accountId}: too much contention, gave up after ${MAX_ATTEMPTS} attempts`);
  }

  /** The round's conditional write: the money row at the next version, with the hold rows it touched. */
  private async write(accountId: string, state: AccountState, before: bigint, applied: Applied): Promise<WriteResult> {
    const holds = holdWrites(accountId, state, applied.touched, applied.onceMade);
    const journal: Journal = { version: (before + 1n).toString(), entries: applied.entries };
    const writes = [moneyRowWrite(accountId, state, before, journal, applied.shortfalls, applied.alerts), ...holds.writes];
    const alertIds = Object.keys(applied.alerts);
    // Announced first: a crash after the write leaves the relay a row that names the alert (an outage here fails the round, unwritten).
    if (alertIds.length > 0) await this.alerts?.announce(accountId, alertIds);
    try {
      const result = writes.length === 1 ? await conditional(this.client, writes[0]!.query, writes[0]!.params) : await conditionalBatch(this.client, writes);
      if (result.applied) {
        this.statement.copyInBackground(accountId, journal);
        for (const [id, hold] of state.holds) if (hold === null) state.holds.delete(id);
        for (const [id, made] of state.once) if (made === null) state.once.delete(id);
        this.written.keep(accountId, { ...state, version: before + 1n, journal });
        return { kind: "applied" };
      }
      // Another writer moved the money row, or a new reservation's hold was open after all.
      this.telemetry.observe({ kind: "ledger_conflict" });
      return { kind: "conflict", found: stateAfterLoss(result.rows ?? [], holds.named) };
    } catch (error) {
      if (!(error instanceof AmbiguousWriteError)) throw error;
      const first = applied.entries[0];
      return { kind: "unknown", lost: first ? { version: before + 1n, day: dayOf(first.at) } : undefined };
    }
  }

  /**
   * Gets the state ready for the batch: reads the hold rows it names that the
   * state does not know (a settlement's or release's hold; a reservation's
   * too when `readReservations`, after a round that could not be sure of
   * them) and counts the open-hold rules it asks for that the row does not
   * count yet (0 when no hold is open). "stale" when what it read is of a
   * newer version; "counted" when it counted a rule from the hold rows.
   */
  private async prepare(accountId: string, state: AccountState, batch: readonly Pending[], readReservations: boolean): Promise<"ready" | "counted" | "stale"> {
    const unknown = new Set<string>();
    for (const { operation } of batch) {
      if (operation.kind === "credit" || operation.kind === "adjust" || operation.kind === "settings" || state.holds.has(operation.reservationId)) continue;
      if (operation.kind !== "reserve" || readReservations) unknown.add(operation.reservationId);
    }
    if (unknown.size > 0 && !(await this.rows.readHolds(accountId, state, [...unknown]))) return "stale";
    // A named credit or adjustment (decision 0039) is judged knowing whether its once row holds an entry.
    const named = unknownOnce(batch, state);
    if (named.length > 0 && !(await this.rows.readOnce(accountId, state, named))) return "stale";
    let counted = false;
    for (const { operation } of batch) {
      const cap = operation.kind === "reserve" ? operation.options?.maxOpenHolds : undefined;
      const key = cap && ruleKey(cap.countedPrefix, cap.exceptPrefix);
      if (!key || state.openCounts.has(key)) continue;
      if (state.openHolds === 0) {
        state.openCounts.set(key, 0);
      } else {
        await this.rows.countHolds(accountId, state, key);
        counted = true;
      }
    }
    return counted ? "counted" : "ready";
  }

  /**
   * The journal of `version`, given the account as read serially: the money
   * row's while it is the newest, else its copy in ledger_rounds (a journal is
   * copied before a write replaces it), on the day its entries were made. An
   * attempt whose entries it holds was applied. Undefined when the account
   * never reached that version (the attempt was not applied) or when its
   * version was written by another round on another day.
   */
  private async journalOf(accountId: string, state: AccountState, version: bigint, day: number): Promise<Journal | undefined> {
    if (state.version < version) return undefined;
    if (state.version === version) return state.journal ?? undefined;
    return this.rows.copiedJournal(accountId, day, version);
  }

  /**
   * The batch was applied by an attempt whose answer was lost, and `journal`
   * is what it wrote: its outcomes are read from the journal (replayedOutcomes),
   * with the holds of its reservations that made no entry read first.
   */
  private async replay(accountId: string, batch: readonly Pending[], state: AccountState, journal: Journal): Promise<Outcome[]> {
    const made = madeBy(journal, batch);
    const reservations = batch.flatMap(({ id, operation }) => (operation.kind === "reserve" && !made.has(id) ? [operation.reservationId] : []));
    // Read at the state's version: a serial read just completed every round in flight, and this account's queue is ours.
    if (reservations.length > 0) await this.rows.readHolds(accountId, state, reservations);
    // A named operation without an entry there was a repeat: its answer is its once row's entry.
    const named = unknownOnce(batch.filter(({ id }) => !made.has(id)), state);
    if (named.length > 0) await this.rows.readOnce(accountId, state, named);
    return replayedOutcomes(batch, state, made);
  }

  /**
   * Answers the batch. A settle that found its hold already ended is a repeat
   * (the reaper after a crash): it answers the settlement recorded, which the
   * row keeps for a capped settlement (its shortfall: amount asked − shortfall
   * was charged); otherwise undefined (a settlement in full charged the amount
   * asked; or the hold was released, or never taken). A failure to read that
   * fails those settles only: the others' outcomes are known.
   */
  async answer(accountId: string, batch: readonly Pending[], outcomes: readonly Outcome[]): Promise<void> {
    let recorded: Record<string, bigint> | undefined;
    let readError: unknown;
    if (outcomes.includes("no_hold")) {
      try {
        const row = await this.rows.moneyRow(accountId, "shortfalls", true);
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
}

/** The operation ids of the batch's named credits and adjustments whose once row the state does not know. */
function unknownOnce(batch: readonly Pending[], state: AccountState): string[] {
  const ids = new Set<string>();
  for (const { operation } of batch) {
    if ((operation.kind === "credit" || operation.kind === "adjust") && operation.once !== undefined && !state.once.has(operation.once)) ids.add(operation.once);
  }
  return [...ids];
}
