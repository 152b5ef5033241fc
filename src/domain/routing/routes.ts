/**
 * Upstream routes: where a model's requests go. A model may have several
 * routes; one is chosen per request and the others are its failover.
 */
export interface Route {
  readonly name: string;
  /** Origin of the vendor API, without the version segment (e.g. https://upstream.example). */
  readonly baseUrl: string;
  readonly apiKey: string;
  /** Share of new requests among the routes of a model; 0 = standby, used only for failover. */
  readonly weight: number;
  /** Bound of one upstream call (and of one stalled stream read). */
  readonly timeoutMs: number;
  /** Input images per request this route accepts (the spec names 100 on one route, 30 on another). */
  readonly maxInputImages: number;
  /** Model ids served, or "*" for all. */
  readonly models: readonly string[];
}

export function routesForModel(routes: readonly Route[], modelId: string): Route[] {
  return routes.filter((route) => route.models.includes("*") || route.models.includes(modelId));
}

export interface RouteChoice {
  /** Route names that are paused by an operator: never used. */
  readonly paused: ReadonlySet<string>;
  /** Routes that failed recently: used only after the healthy ones. */
  readonly unhealthy: ReadonlySet<string>;
  /** Input images of the request; routes with a lower limit cannot take it. */
  readonly imageCount: number;
  /** The route assigned when the job was accepted, tried first. */
  readonly preferred?: string;
  /** [0, 1): picks among weighted routes. */
  readonly random: () => number;
}

/**
 * The order in which a request tries the routes: the preferred (or a
 * weight-drawn) route first, then the others by weight; recently failing
 * routes last; paused ones and those whose limit is too small never.
 */
export function orderRoutes(candidates: readonly Route[], choice: RouteChoice): Route[] {
  const usable = candidates.filter((r) => !choice.paused.has(r.name) && r.maxInputImages >= choice.imageCount);
  const byWeight = (a: Route, b: Route) => b.weight - a.weight;
  const healthy = usable.filter((r) => !choice.unhealthy.has(r.name)).sort(byWeight);
  const failing = usable.filter((r) => choice.unhealthy.has(r.name)).sort(byWeight);
  const first =
    usable.find((r) => r.name === choice.preferred) ?? drawByWeight(healthy, choice.random) ?? drawByWeight(failing, choice.random);
  const rest = [...healthy, ...failing].filter((r) => r !== first);
  return first ? [first, ...rest] : rest;
}

function drawByWeight(routes: readonly Route[], random: () => number): Route | undefined {
  const total = routes.reduce((sum, r) => sum + r.weight, 0);
  if (total <= 0) return routes[0];
  let point = random() * total;
  for (const route of routes) {
    point -= route.weight;
    if (point < 0) return route;
  }
  return routes[routes.length - 1];
}

/** The operator's route file (ROUTES_FILE), validated. */
export interface RoutesFile {
  routes: {
    name: string;
    base_url: string;
    api_key?: string;
    api_key_env?: string;
    weight?: number;
    timeout_ms?: number;
    max_input_images?: number;
    models?: string[];
  }[];
}

export function parseRoutesFile(
  file: RoutesFile,
  defaults: { timeoutMs: number; maxInputImages: number },
  env: Record<string, string | undefined>,
): Route[] {
  if (!file || !Array.isArray(file.routes) || file.routes.length === 0) throw new Error("the routes file needs a non-empty \"routes\" array");
  const names = new Set<string>();
  return file.routes.map((entry, i) => {
    const where = `routes[${i}]`;
    if (!entry.name || names.has(entry.name)) throw new Error(`${where}: a unique "name" is required`);
    names.add(entry.name);
    if (!/^https?:\/\//.test(entry.base_url ?? "")) throw new Error(`${where}: "base_url" must be an http(s) URL`);
    const apiKey = entry.api_key ?? (entry.api_key_env ? env[entry.api_key_env] : undefined);
    if (!apiKey) throw new Error(`${where}: "api_key" or "api_key_env" (naming a set variable) is required`);
    const positive = (value: number | undefined, field: string, fallback: number, min = 1) => {
      if (value === undefined) return fallback;
      if (!Number.isInteger(value) || value < min) throw new Error(`${where}: "${field}" must be an integer ≥ ${min}`);
      return value;
    };
    return {
      name: entry.name,
      baseUrl: entry.base_url.replace(/\/+$/, ""),
      apiKey,
      weight: positive(entry.weight, "weight", 1, 0),
      timeoutMs: positive(entry.timeout_ms, "timeout_ms", defaults.timeoutMs),
      maxInputImages: positive(entry.max_input_images, "max_input_images", defaults.maxInputImages),
      models: entry.models?.length ? entry.models : ["*"],
    };
  });
}
