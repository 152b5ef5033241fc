import { createServer, type IncomingMessage, type Server } from "node:http";
import { timingSafeEqual } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { Money } from "../../domain/money.js";
import type {
  BalanceSnapshot, KeyAccount, Ledger, LedgerEntryPage, LedgerEntryQuery, ReserveOptions, ReserveOutcome, SettledTokens, Settlement, Shortfall,
} from "../../ports/ledger.js";
import type { LedgerMembers, Member } from "./ledger-members.js";

/** A money operation as one member forwards it to an account's owner. */
type Call =
  | { readonly op: "reserve"; readonly accountId: string; readonly reservationId: string; readonly amount: Money; readonly options?: ReserveOptions }
  | { readonly op: "settle"; readonly accountId: string; readonly reservationId: string; readonly amount: Money; readonly tokens?: SettledTokens }
  | { readonly op: "release"; readonly accountId: string; readonly reservationId: string };

type Answer = { readonly ok: unknown } | { readonly error: string };

const PATH = "/ledger/v1/calls";
/** A forward's whole round trip at most: the owner's rounds are bounded by the ledger's own attempts. */
const FORWARD_TIMEOUT_MS = 15_000;
const MAX_BODY_BYTES = 4 * 1024 * 1024;

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
 * round is checked by its version wherever it runs, and a forward that fails
 * (the owner stopped, timed out, or failed the call) is committed here. That
 * may apply an operation twice (an owner that applied it and whose answer was
 * lost), which these three survive: keyed by reservation id, a repeat moves
 * nothing. Credits (not keyed) and reads stay local.
 */
export class AffineLedger implements Ledger {
  private readonly outgoing = new Map<string, { member: Member; calls: { call: Call; resolve(value: unknown): void; reject(error: unknown): void }[] }>();

  constructor(
    private readonly local: Ledger,
    private readonly members: LedgerMembers,
    private readonly secret: string,
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

  release(accountId: string, reservationId: string): Promise<void> {
    return this.route({ op: "release", accountId, reservationId }, () => this.local.release(accountId, reservationId));
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
    try {
      return (await this.forward(owner, call)) as T;
    } catch {
      return locally();
    }
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
    try {
      const response = await fetch(`${address}${PATH}`, {
        method: "POST",
        headers: { authorization: `Bearer ${this.secret}`, "content-type": "application/json" },
        body: encode({ calls: queued.calls.map((c) => c.call) }),
        signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
      });
      if (!response.ok) throw new Error(`ledger peer ${address} answered ${response.status}`);
      const { answers } = decode(await response.text()) as { answers: Answer[] };
      queued.calls.forEach((pending, i) => {
        const answer = answers[i];
        if (answer && "ok" in answer) pending.resolve(answer.ok ?? undefined); // JSON has no undefined: a release's, a settle's without a charge
        else pending.reject(new Error(answer?.error ?? "no answer"));
      });
    } catch (error) {
      for (const pending of queued.calls) pending.reject(error);
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
  const server: Server = createServer((request, response) => {
    const reply = (status: number, body: unknown) => {
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
      let calls: Call[];
      try {
        calls = (decode(Buffer.concat(chunks).toString("utf8")) as { calls: Call[] }).calls;
        if (!Array.isArray(calls)) throw new Error("calls must be a list");
      } catch (error) {
        return reply(400, { error: (error as Error).message });
      }
      void Promise.all(calls.map((call) => run(options.ledger, call).then((ok): Answer => ({ ok: ok ?? null }), (error: unknown): Answer => ({ error: String(error) })))).then(
        (answers) => reply(200, { answers }),
      );
    });
  });
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
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function run(ledger: Ledger, call: Call): Promise<unknown> {
  switch (call.op) {
    case "reserve":
      return ledger.reserve(call.accountId, call.reservationId, call.amount, call.options);
    case "settle":
      return ledger.settle(call.accountId, call.reservationId, call.amount, call.tokens);
    case "release":
      return ledger.release(call.accountId, call.reservationId);
    default:
      return Promise.reject(new Error(`unknown call ${(call as { op: string }).op}`));
  }
}
