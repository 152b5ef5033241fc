/** After this many failures in a row a route is tried only after the healthy ones. */
const UNHEALTHY_AFTER = 3;

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

  unhealthy(): Set<string> {
    return new Set([...this.byRoute].filter(([, h]) => h.consecutiveFailures >= UNHEALTHY_AFTER).map(([name]) => name));
  }

  snapshot(route: string): Readonly<Health> & { healthy: boolean } {
    const health = this.of(route);
    return { ...health, healthy: health.consecutiveFailures < UNHEALTHY_AFTER };
  }
}
