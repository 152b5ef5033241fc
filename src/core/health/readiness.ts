/**
 * Whether this process can serve, in one place: the gateway's /readyz and
 * 503 gate, the gRPC health service and the start-up log all read it. It
 * holds no I/O: the runtime reports what it sees (start-up progress,
 * dependency probes, SIGTERM) and listeners hear every change.
 */
export type DependencyState = "up" | "down";

/** Retry-After of every "cannot serve now" answer (starting, a dependency down). */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 2;

export interface ReadinessReport {
  /** True when the process is started, every dependency is up and it is not draining. */
  readonly ready: boolean;
  /** True when requests can be served: started and every dependency that requests need is up (draining still serves). */
  readonly serving: boolean;
  readonly status: "ok" | "starting" | "unavailable" | "draining";
  /** A short sentence for humans when not ready, e.g. "cassandra unreachable" (details are in the log). */
  readonly reason?: string;
  /** Each dependency's last known state. */
  readonly checks: Readonly<Record<string, DependencyState>>;
}

interface Dependency {
  state: DependencyState;
  /** Whether requests fail without it (a store); a bus outage leaves requests served. */
  neededByRequests: boolean;
  error?: string;
}

export class Readiness {
  private started = false;
  private draining = false;
  private startupProblem: string | undefined;
  private readonly dependencies = new Map<string, Dependency>();
  private readonly listeners = new Set<() => void>();
  private last: ReadinessReport;

  constructor(readonly retryAfterSeconds = UNAVAILABLE_RETRY_AFTER_SECONDS) {
    this.last = this.compute();
  }

  /** Start-up is still under way; `problem` says what it waits for (shown in /readyz). */
  starting(problem?: string): void {
    this.startupProblem = problem;
    this.changed();
  }

  markStarted(): void {
    this.started = true;
    this.startupProblem = undefined;
    this.changed();
  }

  /** SIGTERM: stop being ready (a load balancer drains this process) while still serving what comes. */
  drain(): void {
    this.draining = true;
    this.changed();
  }

  /** Registers a dependency (initially up) and whether requests need it. */
  track(name: string, options: { neededByRequests: boolean }): void {
    this.dependencies.set(name, { state: "up", neededByRequests: options.neededByRequests });
    this.changed();
  }

  /** A probe's or a request's finding. Returns true when this changed the dependency's state. */
  report(name: string, state: DependencyState, error?: string): boolean {
    const dependency = this.dependencies.get(name);
    if (!dependency) return false;
    const flipped = dependency.state !== state;
    dependency.state = state;
    dependency.error = state === "down" ? error : undefined;
    if (flipped) this.changed();
    return flipped;
  }

  get current(): ReadinessReport {
    return this.last;
  }

  /** Called with every change; returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    const before = this.last;
    this.last = this.compute();
    if (before.ready === this.last.ready && before.serving === this.last.serving && before.reason === this.last.reason) return;
    for (const listener of this.listeners) listener();
  }

  private compute(): ReadinessReport {
    const checks: Record<string, DependencyState> = {};
    const down: string[] = [];
    let requestsBlocked = false;
    for (const [name, dependency] of this.dependencies) {
      checks[name] = dependency.state;
      if (dependency.state === "down") {
        // The error itself goes to the log only: addresses and driver messages are not for clients.
        down.push(`${name} unreachable`);
        if (dependency.neededByRequests) requestsBlocked = true;
      }
    }
    if (!this.started) {
      return { ready: false, serving: false, status: "starting", reason: this.startupProblem ?? "starting", checks };
    }
    const serving = !requestsBlocked;
    if (this.draining) return { ready: false, serving, status: "draining", reason: "draining: shutting down", checks };
    if (down.length > 0) return { ready: false, serving, status: "unavailable", reason: down.join("; "), checks };
    return { ready: true, serving: true, status: "ok", checks };
  }
}
