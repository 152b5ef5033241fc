import fastifyCors from "@fastify/cors";
import { cors as connectCors } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { VENDOR_KEY_HEADERS } from "../call-options.js";

/** Names once each, lower case (Connect's lists are capitalised). */
const namesOf = (...lists: readonly (readonly string[])[]) => [...new Set(lists.flat().map((name) => name.toLowerCase()))];

/** What a page may send: the credentials, Idempotency-Key, JSON, the vendor's browser SDK's header and Connect's own list. */
export const CORS_ALLOWED_HEADERS: readonly string[] = namesOf(
  ["authorization", "content-type", "idempotency-key", ...VENDOR_KEY_HEADERS, "x-goog-api-client"],
  connectCors.allowedHeaders,
);

/** What a page may read besides the safelisted headers: Retry-After, Idempotent-Replayed, Location and Connect's own list. */
export const CORS_EXPOSED_HEADERS: readonly string[] = namesOf(
  ["retry-after", "idempotent-replayed", "location"],
  connectCors.exposedHeaders,
);

/** Every method a route of the gateway port takes (admin uses PUT and DELETE; Connect POST and GET). */
export const CORS_METHODS: readonly string[] = ["GET", "HEAD", "POST", "PUT", "DELETE"];

/** How long a browser may reuse a preflight's answer (Chromium caps it at 2 h). */
const PREFLIGHT_MAX_AGE_SECONDS = 7_200;

/** CORS for `origins` only, before every gate (preflights answered while starting); credentials travel in headers: no Allow-Credentials. */
export function corsRoutes(origins: readonly string[]) {
  const allowed = new Set(origins);
  return async (app: FastifyInstance) => {
    if (allowed.size === 0) return;
    await app.register(fastifyCors, {
      // true reflects the request's Origin; false leaves the request as if CORS did not exist.
      origin: (origin, callback) => callback(null, origin !== undefined && allowed.has(origin)),
      methods: [...CORS_METHODS],
      allowedHeaders: [...CORS_ALLOWED_HEADERS],
      exposedHeaders: [...CORS_EXPOSED_HEADERS],
      maxAge: PREFLIGHT_MAX_AGE_SECONDS,
      // An OPTIONS from an allowed origin that is not a preflight still gets 204, never a plain-text 400.
      strictPreflight: false,
    });
  };
}
