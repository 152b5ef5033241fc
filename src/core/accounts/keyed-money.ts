import { createHash } from "node:crypto";
import { requestFingerprint } from "../../domain/idempotency/fingerprint.js";
import type { CoreDeps } from "../core-deps.js";
import { bareKey, idempotent } from "../jobs/idempotent.js";
import { staleBefore } from "../jobs/stale.js";

/** An operator's money request under an Idempotency-Key: which operation, on which account, asking what. */
export interface KeyedMoney {
  readonly accountId: string;
  /** As sent ("" when none): bare or as an RFC 8941 string. */
  readonly key: string;
  /** "admin.credits" or "admin.adjustments": part of the fingerprint, so one key never stands for both. */
  readonly operation: string;
  /** What the request asks (without its key), as the fingerprint reads it. */
  readonly request: object;
}

/** Where an operator's keys live: per account, apart from the account's own job keys. */
export const operatorScope = (accountId: string) => `admin:${accountId}`;

/**
 * The ledger's name for the operation a key stands for (decision 0039): derived from the scope (operator and
 * account), the key and the request's fingerprint, so every retry of the request names the same operation, and
 * another request under a key (after it expired) names another.
 */
export function operationIdOf(accountId: string, key: string, operation: string, request: object): string {
  const digest = createHash("sha256").update(operatorScope(accountId)).update("\n").update(bareKey(key)).update("\n");
  return `op_${digest.update(requestFingerprint(operation, request)).digest("base64url").slice(0, 32)}`;
}

/**
 * Runs an operator's credit or adjustment at most once per key (decision 0039). The key's claim (the jobs' rule,
 * core/jobs/idempotent.ts) answers a reused key (422), a key in progress (409) and a finished key; the money is tied
 * to the key by the operation id `apply` passes to the ledger, whose atomic step applies it once: a finished key's
 * replay, and a retry that takes over the key of a request that died after the money moved, get the entry made then
 * (`replayed`), and nothing moves again. `apply` answers `replayed` when the ledger found its entry made before.
 */
export async function onceUnderKey<T extends { replayed: boolean }>(
  deps: Pick<CoreDeps, "idempotency" | "logger" | "telemetry" | "settingsOf" | "clock">,
  keyed: KeyedMoney,
  apply: (operationId: string | undefined, replay: boolean) => Promise<T>,
): Promise<T> {
  if (bareKey(keyed.key) === "") return apply(undefined, false);
  const operationId = operationIdOf(keyed.accountId, keyed.key, keyed.operation, keyed.request);
  let answer: T | undefined;
  const outcome = await idempotent(
    deps.idempotency,
    deps,
    {
      scope: operatorScope(keyed.accountId), key: keyed.key, operation: keyed.operation, request: keyed.request,
      ttlMs: deps.settingsOf.idempotencyTtlMs, retryAfterSeconds: 1, staleBefore: staleBefore(deps.settingsOf, deps.clock.now()),
    },
    {
      newResponse: () => ({ jobId: operationId }),
      accept: async () => {
        answer = await apply(operationId, false);
        return { jobId: operationId };
      },
      // A dead request's operation is never "gone": taking its key over applies the same operation id, which the
      // ledger applies only if the dead request did not.
      resolveDead: async () => "gone",
    },
  );
  if (!outcome.replayed && answer) return answer;
  // A finished key: the ledger answers the entry its operation made, and moves nothing.
  return { ...(await apply(operationId, true)), replayed: true };
}
