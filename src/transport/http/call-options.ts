import { linkTiming } from "./request-timing.js";
import type { CallOptions } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";

/** Aborts when the client goes away before the answer is complete. Core calls made with it count toward the request's core time. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  linkTiming(controller.signal, reply.request);
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) controller.abort(new Error("client disconnected"));
  });
  return controller.signal;
}

/** `/api/v1` and `/admin/v1`: the key (or the admin token) travels as `authorization: Bearer`. */
export function platformHeaders(request: FastifyRequest): Headers {
  const headers = new Headers();
  if (request.headers.authorization) headers.set("authorization", request.headers.authorization);
  return headers;
}

/**
 * Where the vendor surface takes the key from, first found first: our
 * `x-vendor-api-key`, the header the vendor's own SDKs send
 * (`x-goog-api-key`), and `?key=`, which the vendor's REST API also accepts.
 */
export const VENDOR_KEY_HEADERS = ["x-vendor-api-key", "x-goog-api-key"] as const;

/** The key a vendor-surface request presents (see VENDOR_KEY_HEADERS), or undefined. */
export function vendorKeyOf(request: FastifyRequest): string | undefined {
  for (const name of VENDOR_KEY_HEADERS) {
    const value = request.headers[name];
    if (typeof value === "string" && value.trim()) return value.trim();
  }
  const key = (request.query as { key?: unknown } | undefined)?.key;
  return typeof key === "string" && key ? key : undefined;
}

/** `/api/aimodel`: the key, wherever it came (vendorKeyOf), travels to the core as `x-vendor-api-key`. */
export function vendorHeaders(request: FastifyRequest): Headers {
  const headers = new Headers();
  const key = vendorKeyOf(request);
  if (key) headers.set("x-vendor-api-key", key);
  return headers;
}

export function platformCall(request: FastifyRequest, reply: FastifyReply): CallOptions {
  return { headers: platformHeaders(request), signal: clientGone(reply) };
}

export function vendorCall(request: FastifyRequest, reply: FastifyReply): CallOptions {
  return { headers: vendorHeaders(request), signal: clientGone(reply) };
}

/** Idempotency-Key may come bare or as an RFC 8941 string ("..."). */
export function idempotencyKeyOf(request: FastifyRequest): string {
  const raw = request.headers["idempotency-key"];
  return typeof raw === "string" ? raw.trim() : "";
}
