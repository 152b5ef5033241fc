import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/config.js";
import { findModel } from "../domain/catalog/models.js";
import { parsePriceTable, type ModelPricesText, type PriceTable } from "../domain/pricing/price-table.js";
import { parseRoutesFile, type Route, type RoutesFile } from "../domain/routing/routes.js";

/**
 * What the service starts with: the configuration (read from the environment alone), and what the files it names
 * hold, read here at start: the price table (PRICES_FILE), the routes (ROUTES_FILE, or VENDOR_BASE_URL's one
 * route), and the URL-signing key (URL_SIGNING_SECRET, or the one kept in DATA_DIR, made on a first start).
 */
export interface ServiceSettings extends Omit<Config, "urlSigningSecret"> {
  readonly urlSigningSecret: Buffer;
  /** The initial price table. */
  readonly prices: PriceTable;
  /** Upstream routes to the vendor's API; undefined means the simulated provider. */
  readonly routes: readonly Route[] | undefined;
}

/** Reads the files the configuration names; a file that is missing or wrong stops the start, naming its variable. */
export function loadServiceSettings(config: Config): ServiceSettings {
  return Object.freeze({
    ...config,
    prices: priceTable(config.pricesFile),
    urlSigningSecret: signingSecret(config),
    routes: loadRoutes(config),
  });
}

function priceTable(path: string): PriceTable {
  return parsePriceTable(JSON.parse(readFileSync(path, "utf8")) as Record<string, ModelPricesText>);
}

/** ROUTES_FILE: the full table, each model it names known; else VENDOR_BASE_URL + VENDOR_API_KEY: every model to one upstream. */
function loadRoutes(config: Config): Route[] | undefined {
  const defaults = { timeoutMs: config.upstreamTimeoutMs, maxInputImages: config.maxInputImages };
  if (config.routesFile) {
    const file = JSON.parse(readFileSync(config.routesFile, "utf8")) as RoutesFile;
    const routes = parseRoutesFile(file, defaults, config.environment);
    for (const route of routes) {
      for (const model of route.models) {
        if (model !== "*" && findModel(model)?.id !== model) throw new Error(`ROUTES_FILE: route ${route.name} names an unknown model "${model}"`);
      }
    }
    return routes;
  }
  if (!config.vendor) return undefined;
  return parseRoutesFile({ routes: [{ name: "vendor", base_url: config.vendor.baseUrl, api_key: config.vendor.apiKey }] }, defaults, config.environment);
}

/** The URL-signing key persists in DATA_DIR so result links survive a restart. */
function signingSecret(config: Config): Buffer {
  if (config.urlSigningSecret) return config.urlSigningSecret;
  const path = join(config.dataDir, "url-signing.key");
  try {
    return Buffer.from(readFileSync(path, "utf8").trim(), "hex");
  } catch {
    const secret = randomBytes(32);
    mkdirSync(config.dataDir, { recursive: true });
    writeFileSync(path, secret.toString("hex"), { mode: 0o600 });
    return secret;
  }
}
