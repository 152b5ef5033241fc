import { createServer, type IncomingMessage, type Server } from "node:http";
import { timingSafeEqual } from "node:crypto";
import type { AddressInfo } from "node:net";
import pRetry, { AbortError } from "p-retry";
import type { Money } from "../../domain/money.js";
import { readReleaseReason, type ReleaseReason } from "../../domain/ledger/release-reasons.js";
import type {
  BalanceSnapshot, KeyAccount, Ledger, LedgerEntryPage, LedgerEntryQuery, ReserveOptions, ReserveOutcome, SettledTokens, Settlement, Shortfall,
} from "../../ports/ledger.js";
import type { LedgerMembers, Member } from "./ledger-members.js";
import { DependencyUnavailableError } from "../../ports/dependency.js";

/** A money operation as one member forwards it to an account's owner. */
type Call =
  | { readonly op: "reserve"; readonly accountId: string; readonly reservationId: string; readonly amount: Money; readonly options?: ReserveOptions }
  | { readonly op: "settle"; readonly accountId: string; readonly reservationId: string; readonly amount: Money; readonly tokens?: SettledTokens }
  | { readonly op: "release"; readonly accountId: string; readonly reservationId: string; readonly reason?: string };

type Answer = { readonly ok: unknown } | { readonly error: string };

const PATH = "/ledger/v1/calls";
/** A forward's whole round trip at most: the owner's rounds are bounded by the ledger's own attempts. */
const FORWARD_TIMEOUT_MS = 15_000;
const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Calls per forwarded request at most (some 300 bytes each: well under MAX_BODY_BYTES). */
const MAX_CALLS_PER_REQUEST = 2_000;

/**
 * A forward that provably did no work at the owner: the connection was
 * refused (nothing listens: the owner is gone), or the owner refused the
 * request before running any call. Only then may the call run here: a
 * forward that timed out or lost its connection may still be running at the
 * owner, and a reservation committed here and again later there could leave
 * a hold nobody ends (or open one after its settlement).
 */
class NotDelivered extends Error {}

/** JSON with bigints (money) as {"$bigint": "…"}. */
const encode = (value: unknown) => JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? { $bigint: v.toString() } : v));
const decode = (text: string): unknown =>
  JSON.parse(text, (_key, v: unknown) =>
    v !== null && typeof v === "object" && Object.keys(v).length === 1 && typeof (v as { $bigint?: unknown }).$bigint === "string"
      ? BigInt((v as { $bigint: string }).$bigint)
      : v,
  );

/**
 * The ledger, routing each account's reservations, settlements and releases
 * to the one member that owns the account (LedgerMembers), so that its
 * operations share that member's group-committed rounds instead of
 * contending from every process. A member forwards what it does not own in
 * one request per owner per event-loop turn. Ownership only routes: every
 * round is checked by its version wherever it runs. A forward that provably
 * did no work (NotDelivered), or whose call failed at the owner (finished
 * there), is committed here; one whose outcome is unknown (a timeout, a lost
 * connection) fails as a dependency outage (503 with Retry-After): its intent
 * stays listed, and the reaper ends whatever hold it left, as after a crash.
 * Credits (not keyed by a reservation) and reads stay local.
 */
export class AffineLedger implements Ledger {
  private readonly outgoing = new Map<string, { member: Member; calls: { call: Call; resolve(value: unknown): void; reject(error: unknown): void }[] }>();

  constructor(
    private readonly local: Ledger,
    private readonly members: LedgerMembers,
    private readonly secret: string,
    private readonly timeoutMs = FORWARD_TIMEOUT_MS,
  ) {}

  createAccount(accountId: string, name: string, initialBalance: Money): Promise<void> {
    return this.local.createAccount(accountId, name, initialBalance);
  }

  credit(accountId: string, amount: Money): Promise<BalanceSnapshot | undefined> {
    return this.local.credit(accountId, amount);
  }

  balance(accountId: string): Promise<BalanceSnapshot | undefined> {
    return this.local.balance(accountId);
  }

  reserve(accountId: string, reservationId: string, amount: Money, options?: ReserveOptions): Promise<ReserveOutcome> {
    return this.route({ op: "reserve", accountId, reservationId, amount, ...(options ? { options } : {}) }, () => this.local.reserve(accountId, reservationId, amount, options));
  }

  settle(accountId: string, reservationId: string, amount: Money, tokens?: SettledTokens): Promise<Settlement | undefined> {
    return this.route({ op: "settle", accountId, reservationId, amount, ...(tokens ? { tokens } : {}) }, () => this.local.settle(accountId, reservationId, amount, tokens));
  }

  release(accountId: string, reservationId: string, reason?: ReleaseReason): Promise<void> {
    return this.route({ op: "release", accountId, reservationId, ...(reason !== undefined ? { reason } : {}) }, () => this.local.release(accountId, reservationId, reason));
  }

  shortfalls(accountId: string): Promise<Shortfall[]> {
    return this.local.shortfalls(accountId);
  }

  entries(query: LedgerEntryQuery): Promise<LedgerEntryPage> {
    return this.local.entries(query);
  }

  keyAccount(accountId: string, keyId: string): Promise<KeyAccount> {
    return this.local.keyAccount(accountId, keyId);
  }

  hasAnyAccount(): Promise<boolean> {
    return this.local.hasAnyAccount();
  }

  private async route<T>(call: Call, locally: () => Promise<T>): Promise<T> {
    const owner = this.members.owner(call.accountId);
    if (!owner || owner.id === this.members.self?.id) return locally();
    let answer: Answer;
    try {
      answer = (await this.forward(owner, call)) as Answer;
    } catch (error) {
      if (error instanceof NotDelivered) return locally();
      throw new DependencyUnavailableError("ledger peer", `account ${call.accountId}: the forward to ${owner.address} has no answer (${(error as Error).message})`, {
        cause: error,
      });
    }
    // A call that failed at the owner is finished there: committed here, it runs after it, never beside it.
    return "ok" in answer ? (answer.ok ?? undefined) as T : locally();
  }

  private forward(member: Member, call: Call): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const queued = this.outgoing.get(member.address);
      if (queued) {
        queued.calls.push({ call, resolve, reject });
        return;
      }
      this.outgoing.set(member.address, { member, calls: [{ call, resolve, reject }] });
      // One request per owner per turn: the calls of this turn travel together.
      setImmediate(() => void this.flush(member.address));
    });
  }

  private async flush(address: string): Promise<void> {
    const queued = this.outgoing.get(address)!;
    this.outgoing.delete(address);
    for (let start = 0; start < queued.calls.length; start += MAX_CALLS_PER_REQUEST) {
      void this.send(address, queued.calls.slice(start, start + MAX_CALLS_PER_REQUEST));
    }
  }

  /** One request; each call gets its Answer, or NotDelivered, or the error that leaves its outcome unknown. */
  private async send(address: string, calls: { call: Call; resolve(value: unknown): void; reject(error: unknown): void }[]): Promise<void> {
    try {
      const body = encode({ calls: calls.map((c) => c.call) });
      const signal = AbortSignal.timeout(this.timeoutMs);
      // A pooled connection the owner closed (it stopped, or was killed) fails the request mid-way: asked again, once and at
      // once, on a new connection, a gone owner refuses it, and a live one runs the calls in the same queue as any first try
      // still under way. A refused connection is never asked again (AbortError: p-retry rejects with the NotDelivered).
      const response = await pRetry(
        () => fetch(`${address}${PATH}`, {
          method: "POST", headers: { authorization: `Bearer ${this.secret}`, "content-type": "application/json" }, body, signal,
        }).catch((error: unknown) => {
          const code = ((error as Error).cause as { code?: string } | undefined)?.code;
          throw code === "ECONNREFUSED" ? new AbortError(new NotDelivered(`${address} refused the connection`)) : error;
        }),
        { retries: 1, minTimeout: 0, shouldRetry: () => !signal.aborted },
      );
      const text = await response.text();
      // The owner answers 200 once it has run the calls; anything else was refused before any ran.
      if (response.status !== 200) throw new NotDelivered(`${address} answered ${response.status}`);
      const { answers } = decode(text) as { answers: Answer[] };
      calls.forEach((pending, i) => {
        const answer = answers[i];
        // An owner that ran the calls but answered none for this one: its outcome is unknown.
        if (answer) pending.resolve(answer);
        else pending.reject(new Error("the owner's answer names no outcome for the call"));
      });
    } catch (error) {
      for (const pending of calls) pending.reject(error);
    }
  }
}

export interface LedgerPeer {
  /** http://host:port, as peers reach it. */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * The endpoint members forward an owned account's operations to: POST
 * /ledger/v1/calls with the cluster secret as a bearer token (checked before
 * the body is read), answering each call's outcome in order. Internal: not
 * part of the public API, bound where only the cluster reaches it.
 */
export async function startLedgerPeer(options: { host: string; port: number; advertise?: string; secret: string; ledger: Ledger }): Promise<LedgerPeer> {
  const expected = Buffer.from(`Bearer ${options.secret}`);
  const authorized = (request: IncomingMessage) => {
    const given = Buffer.from(request.headers.authorization ?? "");
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  let running = 0;
  let drained: (() => void) | undefined;
  const server: Server = createServer((request, response) => {
    const reply = (status: number, body: unknown) => {
      if (response.headersSent) return;
      response.writeHead(status, { "content-type": "application/json" });
      response.end(encode(body));
    };
    if (request.method !== "POST" || request.url !== PATH) return reply(404, { error: "not found" });
    if (!authorized(request)) return reply(401, { error: "unauthenticated" });
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reply(413, { error: "too large" });
        request.destroy();
      } else {
        chunks.push(chunk);
      }
    });
    request.on("end", () => {
      if (response.headersSent) return;
      let calls: Call[];
      try {
        calls = (decode(Buffer.concat(chunks).toString("utf8")) as { calls: unknown }).calls as Call[];
        if (!Array.isArray(calls) || calls.length > MAX_CALLS_PER_REQUEST || !calls.every(isCall)) throw new Error("calls must be a list of reserve, settle or release calls");
      } catch (error) {
        return reply(400, { error: (error as Error).message });
      }
      running++;
      void Promise.all(calls.map((call) => run(options.ledger, call).then((ok): Answer => ({ ok: ok ?? null }), (error: unknown): Answer => ({ error: String(error) }))))
        .then((answers) => reply(200, { answers }))
        .finally(() => {
          if (--running === 0) drained?.();
        });
    });
  });
  server.on("clientError", (_error, socket) => socket.destroy());
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    address: `http://${options.advertise ?? options.host}:${port}`,
    // No new connection (a forward then is refused, and runs at its sender); the calls under way finish and answer.
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (running > 0) await new Promise<void>((resolve) => (drained = resolve));
      server.closeAllConnections();
      await closed;
    },
  };
}

const isId = (value: unknown) => typeof value === "string" && value !== "" && value.length <= 512;
const isAmount = (value: unknown) => typeof value === "bigint" && value >= 0n;

/** A call as a peer may send it: a known op, ids, amounts that are whole non-negative picodollars. */
function isCall(value: unknown): value is Call {
  if (value === null || typeof value !== "object") return false;
  const call = value as Record<string, unknown>;
  if (!isId(call.accountId) || !isId(call.reservationId)) return false;
  switch (call.op) {
    case "reserve":
      return isAmount(call.amount) && (call.options === undefined || (call.options !== null && typeof call.options === "object"));
    case "settle":
      return isAmount(call.amount) && (call.tokens === undefined || (call.tokens !== null && typeof call.tokens === "object"));
    case "release":
      // A reason the owner does not know (a newer sender's) is dropped by run(): the release itself still counts.
      return call.reason === undefined || (typeof call.reason === "string" && call.reason.length <= 64);
    default:
      return false;
  }
}

function run(ledger: Ledger, call: Call): Promise<unknown> {
  switch (call.op) {
    case "reserve":
      return ledger.reserve(call.accountId, call.reservationId, call.amount, call.options);
    case "settle":
      return ledger.settle(call.accountId, call.reservationId, call.amount, call.tokens);
    case "release":
      return ledger.release(call.accountId, call.reservationId, readReleaseReason(call.reason));
    default:
      return Promise.reject(new Error(`unknown call ${(call as { op: string }).op}`));
  }
}
