import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import { FailedCredentials, type FailureBudget } from "../../domain/accounts/failed-credentials.js";
import { ErrorDetailSchema } from "../../../gen/generation/v1/generation_service_pb.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { Clock } from "../../ports/clock.js";
import { passThrough } from "../../shared/stream-step.js";
import { toConnectError } from "../errors/rpc-errors.js";

/**
 * The client a call comes from (an IPv4 address, an IPv6 /64), as the
 * transport that received it saw the connection: never read from what the
 * client sends. Undefined for calls of no client (the process's own).
 */
export const CLIENT_ADDRESS = createContextKey<string | undefined>(undefined, { description: "the caller's client address" });

/** The headers that carry a credential: a call without any of them presents nothing to guess with. */
const CREDENTIAL_HEADERS = ["authorization", "x-vendor-api-key", "x-panel-session"] as const;

const presentsCredential = (headers: Headers) => CREDENTIAL_HEADERS.some((name) => headers.has(name));

/** Refusals of a credential that was once valid (a signed session that expired or whose owner token was revoked): no guess. */
const ONCE_VALID = new Set(["session_expired", "session_revoked"]);

/** Whether `error` refused a credential as wrong (401), from the core itself or from a remote core's answer. */
function isWrongCredential(error: unknown): boolean {
  if (error instanceof DomainError) return error.category === "unauthenticated" && !ONCE_VALID.has(error.reason);
  if (!(error instanceof ConnectError) || error.code !== Code.Unauthenticated) return false;
  return !ONCE_VALID.has(error.findDetails(ErrorDetailSchema)[0]?.reason ?? "");
}

/**
 * The one place every credential check passes through (admin token, panel
 * sign-in and sessions, owner tokens, API keys; the edges' checks before a
 * body and the handlers' own): a client whose presented credentials failed
 * AUTH_FAILURE_LIMIT times within AUTH_FAILURE_WINDOW is refused 429
 * too_many_failed_credentials (RESOURCE_EXHAUSTED) with Retry-After until
 * the window ends, before its credential is looked at, so a right guess then
 * gains nothing. A call that presents no credential is no guess and counts
 * nothing; neither does a success, nor a session that was valid once.
 */
export class CredentialGuard {
  private readonly failures: FailedCredentials;

  constructor(budget: FailureBudget, private readonly clock: Clock) {
    this.failures = new FailedCredentials(budget);
  }

  /** Runs `check` for `client` unless it is refused; a failure of a presented credential counts against it. */
  async check<T>(client: string | undefined, headers: Headers, check: () => Promise<T>): Promise<T> {
    if (client === undefined) return check();
    this.refuseIfOverBudget(client);
    try {
      return await check();
    } catch (error) {
      this.noteFailure(client, headers, error);
      throw error;
    }
  }

  /** Throws the 429 when `client` has no failures left in its window. */
  refuseIfOverBudget(client: string | undefined): void {
    // Most calls come from clients with no failure: no clock read for them.
    if (client === undefined || !this.failures.holds(client)) return;
    const seconds = this.failures.refusedFor(client, this.clock.now().getTime());
    if (seconds === undefined) return;
    throw toConnectError(new DomainError(
      "rate_limited", "too_many_failed_credentials",
      `too many failed credential checks from this address; retry in ${seconds} s`, {}, seconds,
    ));
  }

  /** Counts `error` against `client` when it refused a credential the call presented. */
  noteFailure(client: string | undefined, headers: Headers, error: unknown): void {
    if (client !== undefined && isWrongCredential(error) && presentsCredential(headers)) {
      this.failures.failed(client, this.clock.now().getTime());
    }
  }
}

/**
 * Every call of a guarded service (but `open` methods, which check no
 * credential) goes through `guard`, for the client its transport put in the
 * call's context (CLIENT_ADDRESS): the handlers' own credential checks,
 * however the call arrived (a port, the gateway in-process, a remote gateway).
 */
export function credentialGuardInterceptor(guard: CredentialGuard, guarded: ReadonlySet<DescService>, open: ReadonlySet<object> = new Set()): Interceptor {
  return (next) => async (request) => {
    if (!guarded.has(request.service) || open.has(request.method)) return next(request);
    const client = request.contextValues.get(CLIENT_ADDRESS);
    if (!request.stream) return guard.check(client, request.header, () => next(request));
    guard.refuseIfOverBudget(client);
    let response;
    try {
      response = await next(request);
    } catch (error) {
      guard.noteFailure(client, request.header, error);
      throw error;
    }
    if (!response.stream) return response;
    return passThrough(response, {
      ended: (outcome, error) => {
        if (outcome === "failed") guard.noteFailure(client, request.header, error);
      },
    });
  };
}
