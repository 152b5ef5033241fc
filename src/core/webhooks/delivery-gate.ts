/**
 * Who may send a webhook now: per-destination and per-account concurrency
 * limits, a process-wide cap, and a circuit breaker per destination (issue 34).
 *
 * Plain in-process state, no I/O: each process keeps its own (the webhooks
 * role of every process limits only what it sends itself). A delivery refused
 * for a busy lane is handed back to the bus with the delay the gate names (its
 * lanes count it as waiting until it returns, or until twice its wait and a
 * probe's bound have passed: one that never comes back here, taken by another
 * process or ended early, stops counting by itself); one refused for an open
 * breaker is the dispatcher's to fail without a request.
 */
export interface DeliveryGateSettings {
  /** Requests in flight to one destination (origin: scheme, host, port). */
  readonly maxPerDestination: number;
  /** Requests in flight for one account, whatever their destinations. */
  readonly maxPerAccount: number;
  /** Requests in flight from this process. */
  readonly maxInFlight: number;
  /** Consecutive unanswered attempts (timeout, refused, unreachable) that open a destination's breaker. */
  readonly breakerFailures: number;
  /** The first open period; each failed probe doubles it, up to `breakerMaxOpenMs`. */
  readonly breakerOpenMs: number;
  readonly breakerMaxOpenMs: number;
  /** The shortest wait of a refused delivery, and how long a busy lane's request is assumed to take before one was measured. */
  readonly deferMs: number;
  /** How long a half-open breaker's probe may take (the request timeout): others wait that long. */
  readonly probeMs: number;
}

export type GateRefusal = "destination_busy" | "account_busy" | "process_busy" | "breaker_open";

/** How an admitted request ended, as the breaker counts it ("none": no request was made after all). */
export type GateOutcome = "answered" | "unanswered" | "none";

export interface GateTicket {
  /** Ends the request's hold on its lanes; call once. */
  finish(outcome: GateOutcome, durationMs: number, now: number): void;
}

export type Admission =
  | { readonly admitted: true; readonly ticket: GateTicket }
  | { readonly admitted: false; readonly reason: GateRefusal; readonly delayMs: number };

interface Lane {
  inFlight: number;
  /** When each delivery handed back to the bus and not yet returned stops counting (oldest first): how deep the backlog is. */
  readonly waiting: number[];
  /** Typical request duration (moving average), to space the backlog's returns. */
  typicalMs: number;
}

type Breaker =
  | { readonly state: "closed"; readonly failures: number; readonly openMs: number }
  | { readonly state: "open"; readonly until: number; readonly openMs: number }
  | { readonly state: "half-open"; readonly probeEnds: number; readonly openMs: number };

/** The gate's view of a destination, for operators and tests. */
export interface DestinationState {
  readonly inFlight: number;
  readonly waiting: number;
  readonly breaker: Breaker["state"];
}

/** Breakers kept at most; one forgotten only means its destination starts again closed (its lane still bounds its sockets). */
export const MAX_BREAKERS = 10_000;

export class DeliveryGate {
  private readonly destinations = new Map<string, Lane>();
  private readonly accounts = new Map<string, Lane>();
  private readonly breakers = new Map<string, Breaker>();
  private readonly process: Lane;

  constructor(private readonly settings: DeliveryGateSettings) {
    this.process = { inFlight: 0, waiting: [], typicalMs: settings.deferMs };
  }

  /**
   * Admits a request to `destination` for `account`, or says how long to wait.
   * `returning`: this delivery was refused before and comes back now (its wait ends).
   */
  admit(destination: string, account: string, now: number, returning = false): Admission {
    const dest = lane(this.destinations, destination, this.settings.deferMs);
    const acct = lane(this.accounts, account, this.settings.deferMs);
    for (const held of [dest, acct, this.process]) {
      lapse(held, now);
      if (returning) held.waiting.shift();
    }
    const refusal = this.refusal(destination, dest, acct, now);
    if (refusal?.reason === "breaker_open") {
      this.forget(destination, account, dest, acct);
      return { admitted: false, ...refusal };
    }
    if (refusal) {
      const lapsesAt = now + 2 * refusal.delayMs + this.settings.probeMs;
      for (const held of [dest, acct, this.process]) held.waiting.push(lapsesAt);
      return { admitted: false, ...refusal };
    }
    const breaker = this.breakers.get(destination);
    if (breaker?.state === "open") this.breakers.set(destination, { state: "half-open", probeEnds: now + this.settings.probeMs, openMs: breaker.openMs });
    dest.inFlight++;
    acct.inFlight++;
    this.process.inFlight++;
    let finished = false;
    return {
      admitted: true,
      ticket: {
        finish: (outcome, durationMs, at) => {
          if (finished) return;
          finished = true;
          for (const held of [dest, acct, this.process]) {
            held.inFlight--;
            if (outcome !== "none") held.typicalMs = held.typicalMs * 0.8 + Math.max(0, durationMs) * 0.2;
          }
          if (outcome !== "none") this.record(destination, outcome, at);
          lapse(dest, at);
          lapse(acct, at);
          this.forget(destination, account, dest, acct);
        },
      },
    };
  }

  destination(destination: string): DestinationState {
    const dest = this.destinations.get(destination);
    return { inFlight: dest?.inFlight ?? 0, waiting: dest?.waiting.length ?? 0, breaker: this.breakers.get(destination)?.state ?? "closed" };
  }

  /** Lanes and breakers kept (lanes: the destinations and accounts with something in flight or waiting; breakers: at most MAX_BREAKERS). */
  get size(): number {
    return this.destinations.size + this.accounts.size + this.breakers.size;
  }

  private refusal(destination: string, dest: Lane, acct: Lane, now: number): { reason: GateRefusal; delayMs: number } | undefined {
    const s = this.settings;
    const breaker = this.breakers.get(destination);
    if (breaker?.state === "open" && now < breaker.until) return { reason: "breaker_open", delayMs: Math.max(s.deferMs, breaker.until - now) };
    if (breaker?.state === "half-open") {
      // One probe at a time; if its process died with it, the next delivery after its bound probes instead.
      if (now < breaker.probeEnds) return { reason: "breaker_open", delayMs: Math.max(s.deferMs, breaker.probeEnds - now) };
      this.breakers.set(destination, { state: "open", until: now, openMs: breaker.openMs });
    }
    if (dest.inFlight >= s.maxPerDestination) return { reason: "destination_busy", delayMs: this.spacing(dest, s.maxPerDestination) };
    if (acct.inFlight >= s.maxPerAccount) return { reason: "account_busy", delayMs: this.spacing(acct, s.maxPerAccount) };
    if (this.process.inFlight >= s.maxInFlight) return { reason: "process_busy", delayMs: this.spacing(this.process, s.maxInFlight) };
    return undefined;
  }

  /** A busy lane's backlog comes back about as fast as the lane can take it (its typical duration per free slot), not all at once. */
  private spacing(busy: Lane, limit: number): number {
    const turns = Math.ceil((busy.waiting.length + 1) / limit);
    return Math.min(this.settings.breakerMaxOpenMs, Math.max(this.settings.deferMs, Math.round(busy.typicalMs * turns)));
  }

  private record(destination: string, outcome: Exclude<GateOutcome, "none">, now: number): void {
    const s = this.settings;
    const breaker = this.breakers.get(destination) ?? { state: "closed", failures: 0, openMs: s.breakerOpenMs };
    // Most recently failing last: a full map forgets the destination that failed longest ago (callback URLs are the client's to choose).
    this.breakers.delete(destination);
    if (outcome === "answered") return; // any answer closes it: the destination is there, and slow answers are bounded by its lane
    if (this.breakers.size >= MAX_BREAKERS) this.breakers.delete(this.breakers.keys().next().value!);
    if (breaker.state === "half-open") {
      const openMs = Math.min(s.breakerMaxOpenMs, breaker.openMs * 2);
      this.breakers.set(destination, { state: "open", until: now + openMs, openMs });
    } else if (breaker.state === "closed") {
      const failures = breaker.failures + 1;
      this.breakers.set(
        destination,
        failures >= s.breakerFailures ? { state: "open", until: now + breaker.openMs, openMs: breaker.openMs } : { state: "closed", failures, openMs: breaker.openMs },
      );
    } else {
      this.breakers.set(destination, breaker); // already open: requests admitted before it opened end without extending it
    }
  }

  private forget(destination: string, account: string, dest: Lane, acct: Lane): void {
    if (dest.inFlight === 0 && dest.waiting.length === 0) this.destinations.delete(destination);
    if (acct.inFlight === 0 && acct.waiting.length === 0) this.accounts.delete(account);
  }
}

function lane(lanes: Map<string, Lane>, key: string, typicalMs: number): Lane {
  let found = lanes.get(key);
  if (!found) lanes.set(key, (found = { inFlight: 0, waiting: [], typicalMs }));
  return found;
}

/** The destination a URL's requests share: its origin (scheme, host, port), so paths or queries cannot split one server into many. */
export function destinationOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/** Drops the waiting deliveries whose time to come back has lapsed (they went elsewhere, or ended without returning). */
function lapse(lane: Lane, now: number): void {
  while (lane.waiting.length > 0 && lane.waiting[0]! <= now) lane.waiting.shift();
}
