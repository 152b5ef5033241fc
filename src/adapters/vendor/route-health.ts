/** After this many failures in a row a route is tried only after the healthy ones. */
const UNHEALTHY_AFTER = 3;

const NONE: ReadonlySet<string> = new Set();

interface Health {
  requests: number;
  failures: number;
  consecutiveFailures: number;
  lastError?: string;
  lastErrorAt?: Date;
  lastSuccessAt?: Date;
}

/** Per-process view of how each route has been answering (for ordering and for operators). */
export class RouteHealth {
  private readonly byRoute = new Map<string, Health>();

  private of(route: string): Health {
    let health = this.byRoute.get(route);
    if (!health) this.byRoute.set(route, (health = { requests: 0, failures: 0, consecutiveFailures: 0 }));
    return health;
  }

  succeeded(route: string): void {
    const health = this.of(route);
    health.requests++;
    health.consecutiveFailures = 0;
    health.lastSuccessAt = new Date();
  }

  failed(route: string, error: string): void {
    const health = this.of(route);
    health.requests++;
    health.failures++;
    health.consecutiveFailures++;
    health.lastError = error;
    health.lastErrorAt = new Date();
  }

  /** The routes failing now (asked twice per upstream call: the common answer, none, is one shared empty set). */
  unhealthy(): ReadonlySet<string> {
    let names: Set<string> | undefined;
    for (const [name, health] of this.byRoute) if (health.consecutiveFailures >= UNHEALTHY_AFTER) (names ??= new Set()).add(name);
    return names ?? NONE;
  }

  snapshot(route: string): Readonly<Health> & { healthy: boolean } {
    const health = this.of(route);
    return { ...health, healthy: health.consecutiveFailures < UNHEALTHY_AFTER };
  }
}
