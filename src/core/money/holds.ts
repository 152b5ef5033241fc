import { randomUUID } from "node:crypto";
import pRetry from "p-retry";
import { formatMoney, type Money } from "../../domain/money.js";
import type { IntentHolds } from "../../ports/intent-holds.js";
import type { AcceptanceOutcome, AcceptanceWrites, Announcement } from "../../ports/acceptance-writes.js";
import type { Job } from "../../domain/jobs/job.js";
import type { JobStore } from "../../ports/job-store.js";
import type { HoldMemo, Ledger, ReserveOptions, ReserveOutcome, Settlement } from "../../ports/ledger.js";
import type { KeyRefusal } from "../../domain/accounts/key-limits.js";
import type { ReleaseReason } from "../../domain/ledger/release-reasons.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { TokenUsage } from "../../domain/pricing/quotes.js";
import type { Logger } from "../../ports/logger.js";
import type { ReserveResult, Telemetry } from "../../ports/telemetry.js";
import { retryingEveryError } from "../../shared/every-error.js";

/**
 * The one home of money holds. A hold is taken for an intent (a job being
 * accepted, or a synchronous text call) and ends exactly once: settled for
 * what was delivered, or released. Every step is idempotent, so the reaper or
 * a retry may repeat any of them after a crash.
 */
export interface HoldPorts {
  readonly jobs: JobStore;
  readonly ledger: Ledger;
  /** An intent with its hold: taken, and ended for an intent nothing else finishes (one write where the stores can). */
  readonly intentHolds: IntentHolds;
  /** takeHold with the job stored (and announced, where the stores and the bus write it in one transaction). */
  readonly acceptanceWrites: AcceptanceWrites;
  /** Where a settlement that fell short is reported to the operator. */
  readonly logger: Logger;
  /** Holds taken, refused, settled and released. */
  readonly telemetry: Telemetry;
}

/** Intent ids of synchronous text calls (job ids are UUIDs, so the two never meet). */
export const TEXT_CALL_PREFIX = "text-call-";

/** A new synchronous text call's intent id. */
export const newTextCallIntentId = () => `${TEXT_CALL_PREFIX}${randomUUID()}`;

/**
 * The reaper's rule for an intent that holds money and left no job: it is
 * abandoned (its hold released, abandonIntent) once it is older than any
 * live owner could still be working on it. A synchronous text call lasts at
 * most TEXT_CALL_LIMIT; an acceptance stores its job within moments, so one
 * older than REQUEUE_AFTER died.
 */
export function intentAbandoned(intentId: string, ageMs: number, limits: { readonly textCallLimitMs: number; readonly requeueAfterMs: number }): boolean {
  return ageMs > (intentId.startsWith(TEXT_CALL_PREFIX) ? limits.textCallLimitMs : limits.requeueAfterMs);
}

/** A hold's id in the ledger, derived from its intent id alone (the reaper has nothing else). */
export const reservationIdOf = (intentId: string) => `job:${intentId}`;

/**
 * The reservation option that caps an account's unfinished jobs: every job
 * hold counts (queued or being generated), synchronous text calls do not.
 */
export const unfinishedJobsAtMost = (limit: number): ReserveOptions => ({
  maxOpenHolds: { limit, countedPrefix: reservationIdOf(""), exceptPrefix: reservationIdOf(TEXT_CALL_PREFIX) },
});

/**
 * Lists the intent as unfinished first, so a crash between the reservation and
 * whatever follows leaves a trace the reaper can release, then reserves
 * (IntentHolds: in one write where the stores can). A refused reservation
 * leaves nothing behind.
 */
export async function takeHold(
  ports: HoldPorts, accountId: string, intentId: string, amount: Money, now: Date, memo: HoldMemo, options?: ReserveOptions,
): Promise<ReserveOutcome> {
  const outcome = await ports.intentHolds.registerAndReserve(intentId, accountId, now, reservationIdOf(intentId), amount, { ...options, memo });
  ports.telemetry.observe({ kind: "hold_reserved", outcome: reserveResult(outcome) });
  return outcome;
}

/**
 * A job's acceptance (AcceptanceWrites): the hold taken as takeHold takes it
 * (the intent listed, the reservation), with the job stored, and announced
 * ("reserved") where the stores and the bus write it in one transaction;
 * "stored" where the caller announces it. Else refused, or "fenced" /
 * "exists" (see the port).
 */
export async function takeHoldWithJob(
  ports: HoldPorts, job: Job, memo: HoldMemo, options: ReserveOptions, announcement: Announcement,
): Promise<AcceptanceOutcome> {
  const outcome = await ports.acceptanceWrites.accept(job, { amount: job.reserved, options: { ...options, memo } }, announcement);
  if (outcome !== "fenced" && outcome !== "exists") {
    ports.telemetry.observe({ kind: "hold_reserved", outcome: reserveResult(outcome === "stored" ? "reserved" : outcome) });
  }
  return outcome;
}

/**
 * Charges `amount` (what was delivered) and ends the hold. A balance never
 * goes negative: when the hold and the available balance do not cover
 * `amount`, the ledger charges what they cover and records the rest as a
 * shortfall, reported here once (by the settlement that ended the hold).
 * Returns what was charged: also when this is a repeat (the reaper after a
 * crash between the settlement and the job's update), the charge the ledger
 * recorded then, so the job shows the capped charge and never the amount
 * asked. Undefined when the ledger recorded no settlement for the hold (it was
 * released; or, on Cassandra, settled in full: what was asked was charged).
 */
export async function settleHold(
  ports: HoldPorts, accountId: string, intentId: string, amount: Money, usage?: TokenUsage,
): Promise<Money | undefined> {
  const reservationId = reservationIdOf(intentId);
  const settlement = await ports.ledger.settle(accountId, reservationId, amount, tokensOf(usage));
  reportSettlement(ports, accountId, reservationId, amount, settlement);
  return settlement?.charged;
}

/** Ends the hold without charging; `reason` is shown on the statement's release entry. */
export async function releaseHold(ports: HoldPorts, accountId: string, intentId: string, reason: ReleaseReason): Promise<void> {
  await ports.ledger.release(accountId, reservationIdOf(intentId), reason);
  ports.telemetry.observe({ kind: "hold_released" });
}

/**
 * Ends the hold of an intent that nothing else finishes (a synchronous text
 * call, an abandoned acceptance): settled for `charge` (with the usage behind it), or released for
 * `reason` when `charge` is undefined, and the intent no longer listed (IntentHolds: in one
 * write where the stores can). Returns what was charged, as settleHold does.
 */
export async function endIntentHold(
  ports: HoldPorts, accountId: string, intentId: string, charge: { amount: Money; usage?: TokenUsage } | undefined, reason: ReleaseReason,
): Promise<Money | undefined> {
  const reservationId = reservationIdOf(intentId);
  const settlement = await ports.intentHolds.endAndFinalize(
    intentId, accountId, reservationId, charge ? { charge: charge.amount, tokens: tokensOf(charge.usage) } : { release: reason },
  );
  if (!charge) {
    ports.telemetry.observe({ kind: "hold_released" });
    return undefined;
  }
  reportSettlement(ports, accountId, reservationId, charge.amount, settlement);
  return settlement?.charged;
}

/** A synchronous call's settlement the store refused, tried again this many times (1 s doubling to 30 s: about 3 minutes). */
const CALL_SETTLEMENT_RETRIES = 8;

/**
 * Ends a synchronous call's hold (endIntentHold). When the store fails now (a node down, a timeout), the same
 * settlement, idempotent by intent id, is retried in the background instead of leaving the money held until the
 * reaper's TEXT_CALL_LIMIT; the caller's answer does not wait for it. Returns what was charged, or undefined
 * when nothing was (a release, or a settlement still being retried).
 */
export async function endCallHold(
  ports: HoldPorts, accountId: string, intentId: string, charge: { amount: Money; usage?: TokenUsage } | undefined, reason: ReleaseReason,
): Promise<Money | undefined> {
  const settle = () => endIntentHold(ports, accountId, intentId, charge, reason);
  try {
    return await settle();
  } catch (error) {
    const context = { account_id: accountId, reservation_id: reservationIdOf(intentId) };
    ports.logger.warn({ ...context, err: error }, "ending a call's hold failed; retrying it in the background");
    void pRetry(retryingEveryError(settle), { retries: CALL_SETTLEMENT_RETRIES, minTimeout: 1_000, maxTimeout: 30_000, unref: true }).catch(
      (last: unknown) => ports.logger.error({ ...context, err: last }, "a call's hold could not be ended; the reaper releases it after TEXT_CALL_LIMIT"),
    );
    return undefined;
  }
}

/** The statement and usage reports count text tokens: produced ones of every modality are candidates. */
const tokensOf = (usage: TokenUsage | undefined) =>
  usage && { promptTokens: usage.promptTokens, candidatesTokens: usage.textOutputTokens + usage.videoOutputTokens };

/** Counts a settlement, and reports once (by the settlement that ended the hold) what it could not charge. */
function reportSettlement(ports: HoldPorts, accountId: string, reservationId: string, amount: Money, settlement: Settlement | undefined): void {
  if (!settlement || settlement.repeated) return;
  ports.telemetry.observe({ kind: "hold_settled" });
  if (settlement.shortfall > 0n) {
    ports.logger.warn(
      { account_id: accountId, reservation_id: reservationId },
      `billing shortfall: usage cost ${formatMoney(amount)}, charged ${formatMoney(settlement.charged)} (hold + available balance), ` +
        `${formatMoney(settlement.shortfall)} not charged`,
    );
  }
}

/** A reservation's outcome as the metrics count it. */
const reserveResult = (outcome: ReserveOutcome): ReserveResult => (typeof outcome === "object" ? "key_limit" : outcome);

/**
 * The reaper's rule, also used by a retry that finds a dead acceptance: an
 * intent whose job was never stored is fenced off (its job can no longer
 * appear), then its hold is released and its trace removed. Returns false
 * when the job was stored after all (nothing is undone then).
 */
export async function abandonIntent(ports: HoldPorts, accountId: string, intentId: string): Promise<boolean> {
  if (!(await ports.jobs.abandonIntent(intentId))) return false;
  await endIntentHold(ports, accountId, intentId, undefined, "abandoned");
  ports.telemetry.observe({ kind: "acceptance_fenced" });
  return true;
}

/** Retry-After of a key's concurrency refusal: about the time a job takes to finish. */
export const KEY_CONCURRENCY_RETRY_AFTER_SECONDS = 5;

/** Retry-After of a refusal for too many unfinished jobs: a job takes seconds, so a slot frees up soon. */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 5;

/**
 * A refused reservation as the client's error: 401 for a deleted account, 402
 * for money or a key's spend limit, 429 for a key's rate or concurrency limit
 * and for a full queue (`queueCap`: the account's unfinished-jobs limit the
 * reservation was asked to respect).
 */
export function refusalError(outcome: Exclude<ReserveOutcome, "reserved">, amount: Money, queueCap?: number): DomainError {
  if (typeof outcome === "object") return keyRefusalError(outcome.key);
  if (outcome === "unknown_account") return new DomainError("unauthenticated", "inactive_account", "the key's account no longer exists");
  if (outcome === "too_many_open_holds") {
    return new DomainError(
      "rate_limited", "too_many_queued_jobs",
      `this account already has ${queueCap} jobs queued or running; retry when some have finished`,
      { limit: queueCap ?? 0 }, QUEUE_FULL_RETRY_AFTER_SECONDS,
    );
  }
  return new DomainError("insufficient_funds", "insufficient_funds", "the available balance does not cover this request", {
    required: amount.toString(),
  });
}

/**
 * A key's limit refused the reservation: a spend limit is 402
 * key_spend_limit_exceeded (naming the limit), a rate 429 with Retry-After
 * (the end of the minute, or a job's time).
 */
function keyRefusalError(refusal: KeyRefusal): DomainError {
  switch (refusal.kind) {
    case "spend":
      return new DomainError("insufficient_funds", "key_spend_limit_exceeded", `this request would take the API key past its ${refusal.limit}`, {
        limit: refusal.limit,
      });
    case "rate":
      return new DomainError(
        "rate_limited", "key_rate_limit_exceeded", "this API key has made as many requests this minute as its rate_limit_per_minute allows",
        { limit: "rate_limit_per_minute" }, refusal.retryAfterSeconds,
      );
    case "concurrency":
      return new DomainError(
        "rate_limited", "key_concurrency_limit_exceeded", "this API key has as many jobs queued or running as its max_concurrent_jobs allows",
        { limit: "max_concurrent_jobs" }, KEY_CONCURRENCY_RETRY_AFTER_SECONDS,
      );
  }
}
