import type { Money } from "../../domain/money.js";
import type { JobStore } from "../../ports/job-store.js";
import type { Ledger, ReserveOutcome } from "../../ports/ledger.js";

/**
 * The one home of money holds. A hold is taken for an intent (a job being
 * accepted, or a synchronous text call) and ends exactly once: settled for
 * what was delivered, or released. Every step is idempotent, so the reaper or
 * a retry may repeat any of them after a crash.
 */
export interface HoldPorts {
  readonly jobs: JobStore;
  readonly ledger: Ledger;
}

/** A hold's id in the ledger, derived from its intent id alone (the reaper has nothing else). */
export const reservationIdOf = (intentId: string) => `job:${intentId}`;

/**
 * Lists the intent as unfinished first, so a crash between the reservation and
 * whatever follows leaves a trace the reaper can release, then reserves.
 * A refused reservation leaves nothing behind.
 */
export async function takeHold(ports: HoldPorts, accountId: string, intentId: string, amount: Money, now: Date): Promise<ReserveOutcome> {
  await ports.jobs.registerIntent(intentId, accountId, now);
  const outcome = await ports.ledger.reserve(accountId, reservationIdOf(intentId), amount);
  if (outcome !== "reserved") await ports.jobs.markFinalized(intentId);
  return outcome;
}

/** Charges `amount` (what was delivered) and ends the hold. */
export async function settleHold(ports: HoldPorts, accountId: string, intentId: string, amount: Money): Promise<void> {
  await ports.ledger.settle(accountId, reservationIdOf(intentId), amount);
}

/** Ends the hold without charging. */
export async function releaseHold(ports: HoldPorts, accountId: string, intentId: string): Promise<void> {
  await ports.ledger.release(accountId, reservationIdOf(intentId));
}

/**
 * The reaper's rule, also used by a retry that finds a dead acceptance: an
 * intent whose job was never stored is fenced off (its job can no longer
 * appear), then its hold is released and its trace removed. Returns false
 * when the job was stored after all (nothing is undone then).
 */
export async function abandonIntent(ports: HoldPorts, accountId: string, intentId: string): Promise<boolean> {
  if (!(await ports.jobs.abandonIntent(intentId))) return false;
  await releaseHold(ports, accountId, intentId);
  await ports.jobs.markFinalized(intentId);
  return true;
}
