import fastifyCors from "@fastify/cors";
import { cors as connectCors } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { VENDOR_KEY_HEADERS } from "../call-options.js";

/** Names once each, lower case (Connect's lists are capitalised). */
const namesOf = (...lists: readonly (readonly string[])[]) => [...new Set(lists.flat().map((name) => name.toLowerCase()))];

/** CORS for `origins` only, before every gate (preflights answered while starting); credentials travel in headers: no Allow-Credentials. */
export function corsRoutes(origins: readonly string[]) {
  const allowed = new Set(origins);
  return async (app: FastifyInstance) => {
    if (allowed.size === 0) return;
    await app.register(fastifyCors, {
      // true reflects the request's Origin; false leaves the request as if CORS did not exist.
      origin: (origin, callback) => callback(null, origin !== undefined && allowed.has(origin)),
      // Admin uses PUT and DELETE; Connect POST and GET.
      methods: ["GET", "HEAD", "POST", "PUT", "DELETE"],
      // The credentials, Idempotency-Key, JSON, the vendor's browser SDK's header and Connect's own list.
      allowedHeaders: namesOf(
        ["authorization", "content-type", "idempotency-key", ...VENDOR_KEY_HEADERS, "x-goog-api-client"],
        connectCors.allowedHeaders,
      ),
      exposedHeaders: namesOf(["retry-after", "idempotent-replayed", "location"], connectCors.exposedHeaders),
      // Chromium caps a preflight's reuse at 2 h.
      maxAge: 7_200,
      // An OPTIONS from an allowed origin that is not a preflight still gets 204, never a plain-text 400.
      strictPreflight: false,
    });
  };
}
