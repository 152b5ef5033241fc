import ipaddr from "ipaddr.js";
import { ROLES, type Role } from "./types.js";

/*
 * The syntaxes of the variables' values, each a function of the text (never empty: an empty variable counts as
 * unset and takes its default) and the variable's name, for the message of a value it refuses.
 */

export const KIB = 1024;
export const MIB = 1024 * KIB;

/** A value a variable does not accept: its message names the variable and what it takes. */
export class ConfigError extends Error {}

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `500ms`, `5s`, `30m`, `2h`, `30d`, in milliseconds. */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  if (!match) throw new ConfigError(`"${text}" is not a duration such as 500ms, 5s, 30m, 2h or 30d`);
  return Number(match[1]) * UNIT_MS[match[2]!]!;
}

/** A duration, named in its refusal; `atLeast` raises a shorter one to that many milliseconds (it is no error). */
export function duration(text: string, name: string, atLeast = 0): number {
  try {
    return Math.max(atLeast, parseDuration(text));
  } catch (error) {
    throw new ConfigError(`${name}: ${(error as Error).message}`);
  }
}

export function integer(text: string, name: string, min: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) throw new ConfigError(`${name} must be an integer ≥ ${min} (got "${text}")`);
  return value;
}

const SIZE_UNITS: Record<string, number> = { "": 1, B: 1, KiB: KIB, MiB: MIB, GiB: 1024 * MIB };

/** Bytes: `4096`, `4096B`, `64KiB`, `2MiB`, `1GiB`. */
export function size(text: string, name: string, min: number): number {
  const match = /^(\d+)(|B|KiB|MiB|GiB)$/.exec(text.trim());
  const value = match ? Number(match[1]) * SIZE_UNITS[match[2]!]! : NaN;
  if (!Number.isSafeInteger(value) || value < min) {
    throw new ConfigError(`${name} must be a size such as 4096, 64KiB or 2MiB, at least ${min} bytes (got "${text}")`);
  }
  return value;
}

/** `true`/`1` or `false`/`0`, in any case. */
export function flag(text: string, name: string): boolean {
  const raw = text.toLowerCase();
  if (raw === "false" || raw === "0") return false;
  if (raw === "true" || raw === "1") return true;
  throw new ConfigError(`${name} must be true or false (got "${raw}")`);
}

/** One of `allowed`, in any case. */
export function oneOf<T extends string>(text: string, name: string, allowed: readonly T[]): T {
  const raw = text.toLowerCase();
  if (!allowed.includes(raw as T)) throw new ConfigError(`${name} must be one of ${allowed.join(", ")} (got "${raw}")`);
  return raw as T;
}

/** Comma-separated, each entry trimmed, empty entries left out. */
export const list = (text: string | undefined): string[] => (text ?? "").split(",").map((s) => s.trim()).filter(Boolean);

export function roles(text: string): Set<Role> {
  if (text === "all") return new Set(ROLES);
  const listed = text.split(",").map((r) => r.trim());
  for (const role of listed) {
    if (!ROLES.includes(role as Role)) throw new ConfigError(`ROLE must be all or a list of ${ROLES.join(", ")} (got "${text}")`);
  }
  return new Set(listed as Role[]);
}

/**
 * CORS_ORIGINS: exact origins, as a browser sends them in `Origin`
 * (`https://app.example.com`, `http://localhost:5173`): http or https, no
 * path, no trailing slash, the default port left out. `*` is refused: which
 * web apps may hold and use keys and the admin token from a browser is a
 * decision to name, not to leave open.
 */
export function corsOrigins(text: string | undefined): string[] {
  const origins = list(text);
  for (const entry of origins) {
    if (entry === "*") throw new ConfigError("CORS_ORIGINS: \"*\" is not allowed; list the origins of your web apps (e.g. https://app.example.com)");
    let origin: string | undefined;
    try {
      const url = new URL(entry);
      if (url.protocol === "http:" || url.protocol === "https:") origin = url.origin;
    } catch {
      origin = undefined;
    }
    if (origin !== entry) {
      const hint = origin ? ` (did you mean "${origin}"?)` : "";
      throw new ConfigError(`CORS_ORIGINS: "${entry}" is not an origin: scheme://host[:port], http or https, no path or trailing slash${hint}`);
    }
  }
  return [...new Set(origins)];
}

/** proxy-addr's names for address ranges, as TRUST_PROXY may use them. */
const PROXY_RANGE_NAMES = new Set(["loopback", "linklocal", "uniquelocal"]);

/**
 * TRUST_PROXY: "false"/unset, "true", or comma-separated proxy addresses, CIDRs and range names. A hop count is refused:
 * Fastify 5 trusts no one for a number (it cannot check the peer), which would silently leave the cookie without Secure.
 */
export function trustProxy(text: string | undefined): boolean | readonly string[] {
  const raw = (text ?? "").trim();
  if (raw === "" || raw.toLowerCase() === "false") return false;
  if (raw.toLowerCase() === "true") return true;
  const entries = list(raw);
  for (const entry of entries) {
    if (PROXY_RANGE_NAMES.has(entry)) continue;
    // Dotted quads only: ipaddr would read "2" as 0.0.0.2, and a hop count must not pass for an address.
    const address = entry.split("/")[0]!;
    const strict = ipaddr.IPv4.isValidFourPartDecimal(address) || ipaddr.IPv6.isValid(address);
    if (strict && (entry.includes("/") ? ipaddr.isValidCIDR(entry) : true)) continue;
    throw new ConfigError(
      `TRUST_PROXY must be true, false, or comma-separated proxy addresses, CIDRs, loopback, linklocal or uniquelocal (got "${entry}"; a hop count is not supported)`,
    );
  }
  return entries;
}

/** OTEL_EXPORTER_OTLP_HEADERS: comma-separated key=value pairs, values URL-encoded (the OpenTelemetry specification's format). */
export function otlpHeaders(text: string, name: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of list(text)) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    try {
      headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch (error) {
      throw new ConfigError(`${name}: ${(error as Error).message} in "${pair}" (values are URL-encoded)`);
    }
  }
  return headers;
}
