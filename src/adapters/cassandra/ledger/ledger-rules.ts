import type { Money } from "../../../domain/money.js";
import type { ReleaseReason } from "../../../domain/ledger/release-reasons.js";
import { boundedCharge } from "../../../domain/pricing/settlement.js";
import { countCharge, countReservation, keyAdmission, type KeyRefusal } from "../../../domain/accounts/key-limits.js";
import { encodeKeySpending } from "../../shared/key-limits-codec.js";
import { isLowBalance, lowBalanceTransition } from "../../../domain/accounts/low-balance.js";
import type { AccountChange, HoldMemo, KeyReservation, LedgerEntryType, SettledTokens } from "../../../ports/ledger.js";
import {
  keyHolds, ruleKey, SEQ_PER_VERSION, spendingOf, tally,
  type AccountState, type Hold, type Journal, type JournalEntry, type Operation, type Outcome, type Pending, type TouchedHolds,
} from "./account-state.js";

/**
 * The ledger's rules, on an account's state in memory: what a round's batch
 * of operations does to the money (apply), and what a batch applied by a
 * write whose answer was lost did (replayedOutcomes). No I/O: the rounds
 * (ledger-rounds.ts) read what these need and write what they change.
 */

/** What applying a batch did: see apply. */
export interface Applied {
  readonly outcomes: Outcome[];
  /** The ids of the operations that changed something. */
  readonly changed: string[];
  /** The shortfalls the batch's settlements recorded, by reservation id. */
  readonly shortfalls: Record<string, Money>;
  readonly entries: JournalEntry[];
  /** The hold rows it touched, and what was known of each before. */
  readonly touched: TouchedHolds;
  /** Reservations refused whose id was not read (an open hold of that id would make the answer "reserved"). */
  readonly unsure: string[];
  /** The balance.low events the batch's movements made due (the outbox, by alert id: JSON of available, threshold, at). */
  readonly alerts: Record<string, string>;
  /** The named operations (`once`) the batch applied: their once rows are written with the round (decision 0039). */
  readonly onceMade: string[];
}

/** The state of one apply: the account, and what the batch did so far. */
interface Round extends Applied {
  readonly state: AccountState;
  readonly now: number;
  touch(id: string): void;
  record(op: string, type: LedgerEntryType, amount: Money, reservedChange: Money, memo?: HoldMemo, tokens?: SettledTokens, reason?: ReleaseReason, note?: string): void;
}

/**
 * Applies the batch to the state; returns each operation's outcome, the ids
 * of the operations that changed something, the shortfalls the batch's
 * settlements recorded, the hold rows it touched, and the reservations
 * refused whose id was not read (an open hold of that id would make the
 * answer "reserved": the round must read them and judge again).
 */
export function apply(state: AccountState, batch: readonly Pending[], now: number): Applied {
  const round = startRound(state, now);
  for (const { id, operation } of batch) {
    switch (operation.kind) {
      case "reserve":
        applyReserve(round, id, operation);
        break;
      case "settle":
      case "release":
        applyEnd(round, id, operation);
        break;
      case "credit":
        if (repeated(round, operation.once)) break;
        state.balance += operation.amount;
        round.record(id, "credit", operation.amount, 0n);
        // The event rides in the credit's own entry, so it is written by the round's conditional write or not at all.
        if (operation.audit !== undefined) round.entries.push({ ...round.entries.pop()!, audit: operation.audit });
        round.changed.push(id);
        round.outcomes.push({ credited: madeOnce(round, operation.once) });
        break;
      case "adjust":
        if (!repeated(round, operation.once)) applyAdjust(round, id, operation);
        break;
      case "settings":
        applySettings(round, id, operation.change);
        break;
    }
    if (operation.kind !== "settings") judgeLowBalance(round, id);
  }
  const { outcomes, changed, shortfalls, entries, touched, unsure, alerts, onceMade } = round;
  return { outcomes, changed, shortfalls, entries, touched, unsure, alerts, onceMade };
}

/**
 * A named operation (decision 0039) whose once row holds an entry: answered with that entry, nothing moves. The round
 * has read the row (LedgerRounds.prepare), so undefined here means an operation without a name.
 */
function repeated(round: Round, once: string | undefined): boolean {
  const made = once === undefined ? undefined : round.state.once.get(once);
  if (!made) return false;
  round.outcomes.push({ madeBefore: made });
  return true;
}

/** The entry just recorded; for a named operation it is also its once row's, written with the round. */
function madeOnce(round: Round, once: string | undefined): JournalEntry {
  const entry = round.entries.at(-1)!;
  if (once !== undefined) {
    round.state.once.set(once, entry);
    round.onceMade.push(once);
  }
  return entry;
}

function startRound(state: AccountState, now: number): Round {
  const touched: TouchedHolds = new Map();
  const entries: JournalEntry[] = [];
  const seqBase = (state.version + 1n) * SEQ_PER_VERSION;
  // Entry times never go back along an account's entries (they order its statement and bucket its days).
  const at = Math.max(now, state.journal?.entries.at(-1)?.at ?? 0);
  return {
    state, now, outcomes: [], changed: [], shortfalls: {}, entries, touched, unsure: [], alerts: {}, onceMade: [],
    touch(id) {
      if (touched.has(id)) return;
      const known = state.holds.get(id);
      touched.set(id, known ? "open" : known === null ? "absent" : "assumed");
    },
    record(op, type, amount, reservedChange, memo, tokens, reason, note) {
      entries.push({
        seq: (seqBase + BigInt(entries.length)).toString(), type, amount: amount.toString(), balanceAfter: state.balance.toString(),
        reservedChange: reservedChange.toString(), reservedAfter: state.reserved.toString(), ...(memo ? { memo } : {}), ...(tokens ? { tokens } : {}),
        ...(reason !== undefined ? { reason } : {}), ...(note !== undefined ? { note } : {}), at, op,
      });
    },
  };
}

/** The name and/or the threshold; the state is judged again on the new threshold, without an event (decision 0038). */
function applySettings(round: Round, id: string, change: AccountChange): void {
  const { state } = round;
  if (change.name !== undefined) state.name = change.name;
  if (change.lowBalanceThreshold !== undefined) {
    state.lowBalanceThreshold = change.lowBalanceThreshold ?? undefined;
    state.lowBalance = isLowBalance(state.balance - state.reserved, state.lowBalanceThreshold);
  }
  round.changed.push(id);
  round.outcomes.push("done");
}

/** After a movement: a crossing below the threshold adds one alert to the outbox, in this round's write; a return above re-arms. */
function judgeLowBalance(round: Round, id: string): void {
  const { state } = round;
  const available = state.balance - state.reserved;
  const transition = lowBalanceTransition(available, state.lowBalanceThreshold, state.lowBalance);
  if (transition === undefined) return;
  state.lowBalance = transition === "crossed";
  if (transition === "crossed") {
    // The operation's id is unique and kept on its entry: the alert's id, so a replayed round names the same alert.
    round.alerts[`bal_${id}`] = JSON.stringify({ available: available.toString(), threshold: state.lowBalanceThreshold!.toString(), at: round.now });
  }
}

/** An adjustment: a debit never takes more than the available balance (refused: nothing moves). */
function applyAdjust(round: Round, id: string, operation: Extract<Operation, { kind: "adjust" }>): void {
  const { state } = round;
  if (operation.amount < 0n && state.balance - state.reserved < -operation.amount) {
    round.outcomes.push("insufficient_funds");
    return;
  }
  state.balance += operation.amount;
  round.record(id, "adjustment", operation.amount, 0n, undefined, undefined, undefined, operation.reason);
  // As a credit's: the event rides in the adjustment's own entry, written by the round's conditional write or not at all.
  if (operation.audit !== undefined) round.entries.push({ ...round.entries.pop()!, audit: operation.audit });
  round.changed.push(id);
  round.outcomes.push({ adjusted: madeOnce(round, operation.once) });
}

function applyReserve(round: Round, id: string, operation: Extract<Operation, { kind: "reserve" }>): void {
  const { state, now } = round;
  let refusal: KeyRefusal | undefined;
  const cap = operation.options?.maxOpenHolds;
  const known = state.holds.get(operation.reservationId);
  if (known) {
    round.outcomes.push("reserved");
    return;
  }
  if (cap && state.openCounts.get(ruleKey(cap.countedPrefix, cap.exceptPrefix))! >= cap.limit) {
    round.outcomes.push("too_many_open_holds");
  } else if (state.balance - state.reserved < operation.amount) {
    round.outcomes.push("insufficient_funds");
  } else if (operation.options?.key && (refusal = keyRefusal(state, operation.amount, operation.options.key, now))) {
    round.outcomes.push({ key: refusal });
  } else {
    const key = operation.options?.key;
    if (key?.limits.ratePerMinute !== undefined) state.keys.set(key.keyId, encodeKeySpending(countReservation(spendingOf(state, key.keyId), new Date(now))));
    round.touch(operation.reservationId);
    const memo = operation.options?.memo;
    const hold: Hold = { amount: operation.amount, ...(memo ? { memo: JSON.stringify(memo) } : {}) };
    state.holds.set(operation.reservationId, hold);
    state.reserved += operation.amount;
    tally(state, operation.reservationId, hold, 1);
    round.record(id, "hold", 0n, operation.amount, memo);
    round.outcomes.push("reserved");
    round.changed.push(id);
    return;
  }
  if (known === undefined) round.unsure.push(operation.reservationId);
}

function applyEnd(round: Round, id: string, operation: Extract<Operation, { kind: "settle" | "release" }>): void {
  const { state, now } = round;
  const held = state.holds.get(operation.reservationId);
  if (!held) {
    round.outcomes.push(operation.kind === "settle" ? "no_hold" : "done");
    return;
  }
  // Bounded before the hold leaves `reserved`: at most hold + available is charged.
  const settlement = operation.kind === "settle" ? boundedCharge(operation.amount, held.amount, state) : undefined;
  const memo = held.memo === undefined ? undefined : (JSON.parse(held.memo) as HoldMemo);
  round.touch(operation.reservationId);
  state.holds.set(operation.reservationId, null);
  state.reserved -= held.amount;
  tally(state, operation.reservationId, held, -1);
  if (settlement) {
    state.balance -= settlement.charged;
    if (settlement.shortfall > 0n) round.shortfalls[operation.reservationId] = settlement.shortfall;
    if (memo?.keyId !== undefined) state.keys.set(memo.keyId, encodeKeySpending(countCharge(spendingOf(state, memo.keyId), settlement.charged, new Date(now))));
    round.record(id, "charge", -settlement.charged, -held.amount, memo, operation.kind === "settle" ? operation.tokens : undefined);
  } else {
    round.record(id, "release", 0n, -held.amount, memo, undefined, operation.kind === "release" ? operation.reason : undefined);
  }
  round.changed.push(id);
  round.outcomes.push(settlement ?? "done");
}

/** What a key's limits say of a reservation of `amount` on the account as it is. */
export function keyRefusal(state: AccountState, amount: Money, key: KeyReservation, now: number) {
  return keyAdmission(key.limits, spendingOf(state, key.keyId), keyHolds(state, key.keyId), amount, key.isJob, new Date(now));
}

/** The entries of the batch's operations in a journal, by operation id. */
export function madeBy(journal: Journal, batch: readonly Pending[]): Map<string, JournalEntry> {
  const ids = new Set(batch.map((p) => p.id));
  return new Map(journal.entries.flatMap((entry) => (entry.op !== undefined && ids.has(entry.op) ? [[entry.op, entry] as const] : [])));
}

/**
 * The outcomes of a batch applied by an attempt whose answer was lost, from
 * `made` (its entries in the journal that attempt wrote) and the state as
 * read since, knowing the holds of its reservations that made no entry.
 * Recomputing them against today's state would be wrong: an operation
 * changed something exactly when the journal holds its entry; a reservation
 * without one was refused, or found its hold open (a repeat); a settlement's
 * entry says what it charged.
 */
export function replayedOutcomes(batch: readonly Pending[], state: AccountState, made: ReadonlyMap<string, JournalEntry>): Outcome[] {
  return batch.map(({ id, operation }): Outcome => {
    const entry = made.get(id);
    switch (operation.kind) {
      case "reserve": {
        if (entry || state.holds.get(operation.reservationId)) return "reserved";
        // Refused by a key limit: the state that refused it is gone; judged again on today's (refused either way).
        if (operation.options?.key && state.balance - state.reserved >= operation.amount) {
          const refusal = keyRefusal(state, operation.amount, operation.options.key, Date.now());
          if (refusal) return { key: refusal };
        }
        // Refused: for the open-hold limit or for funds; a refusal of either kind reserved nothing.
        const cap = operation.options?.maxOpenHolds;
        const counted = cap && state.openCounts.get(ruleKey(cap.countedPrefix, cap.exceptPrefix));
        return cap && counted !== undefined && counted >= cap.limit ? "too_many_open_holds" : "insufficient_funds";
      }
      case "credit":
      case "adjust": {
        // Applied exactly when its entry is in the journal; otherwise a repeat of a named operation (its once row,
        // read by LedgerRounds.replay) or, for an adjustment, refused for funds.
        if (entry) return operation.kind === "credit" ? { credited: entry } : { adjusted: entry };
        const made = operation.once === undefined ? undefined : state.once.get(operation.once);
        if (made) return { madeBefore: made };
        return operation.kind === "credit" ? "done" : "insufficient_funds";
      }
      case "settle": {
        if (!entry) return "no_hold"; // it found no hold: a repeat
        const charged = -BigInt(entry.amount);
        return { charged, shortfall: operation.amount - charged };
      }
      default:
        return "done";
    }
  });
}
