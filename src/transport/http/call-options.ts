import type { CallOptions } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";

/** Aborts when the client goes away before the answer is complete. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
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

/** `/api/aimodel`: the key travels as `x-vendor-api-key` (or `?key=`, as the vendor also accepts). */
export function vendorHeaders(request: FastifyRequest): Headers {
  const headers = new Headers();
  const key = request.headers["x-vendor-api-key"] ?? (request.query as { key?: string } | undefined)?.key;
  if (typeof key === "string" && key) headers.set("x-vendor-api-key", key);
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
