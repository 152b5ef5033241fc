import { createContextValues, type CallOptions, type ContextValues } from "@connectrpc/connect";
import { ANSWER_DELIVERY, type AnswerDelivery, CLIENT_ADDRESS } from "../../core/index.js";
import type { FastifyReply, FastifyRequest } from "fastify";
import { REQUEST_TIMING, timingOf } from "./request-timing.js";
import { clientOfRequest } from "../client-address.js";
import { onAnswerEnd } from "./edge/pipelining.js";
import { credentialsOf } from "../rpc/credentials.js";
import { wantsCsv } from "./csv-export.js";

/** Why a request's core calls are aborted when its client went away before the answer was complete. */
const CLIENT_GONE = new Error("client disconnected");

/** A request's core calls: headers, timing, and a signal aborted when its client goes away (made lazily: most calls never ask). */
class RequestCall implements CallOptions {
  private controller: AbortController | undefined;
  readonly contextValues: ContextValues;

  constructor(
    private readonly reply: FastifyReply,
    readonly headers: Headers,
    contextValues?: ContextValues,
  ) {
    this.contextValues = callerValues(reply.request, contextValues).set(REQUEST_TIMING, timingOf(reply.request));
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = (this.controller = new AbortController());
      const raw = this.reply.raw;
      // onAnswerEnd, not 'close': an answer queued behind another pipelined one never closes when its connection dies.
      onAnswerEnd(raw, () => {
        if (!raw.writableFinished) controller.abort(CLIENT_GONE);
      });
    }
    return this.controller.signal;
  }
}

/** `values` (new ones when not given) with the request's client address: its connection's, never a header's. */
export function callerValues(request: FastifyRequest, values: ContextValues = createContextValues()): ContextValues {
  return values.set(CLIENT_ADDRESS, clientOfRequest(request));
}

/** Call options for a request's core calls (see RequestCall): `headers`, and `contextValues` when given. */
export function requestCall(reply: FastifyReply, headers: Headers = new Headers(), contextValues?: ContextValues): CallOptions {
  return new RequestCall(reply, headers, contextValues);
}

const headersWith = (name: string, value: string | undefined) => new Headers(value ? { [name]: value } : {});

/**
 * `/api/v1` and `/admin/v1`: the key (or the admin token) travels as `authorization: Bearer`. The one exception is
 * the panel's download (docs/panel.md): a GET asking for CSV with no `authorization`, carrying the session cookie
 * and its CSRF token, is the session's call (the core checks both, as on the Connect mount); every other REST
 * request ignores the cookie.
 */
export function platformHeaders(request: FastifyRequest): Headers {
  const { authorization } = request.headers;
  if (authorization || request.method !== "GET" || !wantsCsv(request)) return headersWith("authorization", authorization);
  const credentials = credentialsOf(request.headers);
  const session = credentials.get("x-panel-session");
  const csrf = credentials.get("x-csrf-token");
  return session && csrf ? new Headers({ "x-panel-session": session, "x-csrf-token": csrf }) : new Headers();
}

/** Where the vendor surface takes the key, first found first: ours, the vendor SDKs' header, then `?key=` (as the vendor's REST API). */
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
export const vendorHeaders = (request: FastifyRequest): Headers => headersWith("x-vendor-api-key", vendorKeyOf(request));

export function platformCall(request: FastifyRequest, reply: FastifyReply, contextValues?: ContextValues): CallOptions {
  return new RequestCall(reply, platformHeaders(request), contextValues);
}

export function vendorCall(request: FastifyRequest, reply: FastifyReply, contextValues?: ContextValues): CallOptions {
  return new RequestCall(reply, vendorHeaders(request), contextValues);
}

/** Whether a REST answer reached its client: undelivered when the response closed before it finished writing. */
export function replyDelivery(reply: FastifyReply): AnswerDelivery {
  return {
    onUndelivered(undelivered) {
      const raw = reply.raw;
      if (raw.writableFinished) return;
      onAnswerEnd(raw, () => raw.writableFinished || undelivered());
    },
  };
}

/** `contextValues` (or new ones) with the answer's delivery, for a creation: the core cancels a job whose 202 never left. */
export function withDelivery(reply: FastifyReply, contextValues?: ContextValues): ContextValues {
  return (contextValues ?? createContextValues()).set(ANSWER_DELIVERY, replyDelivery(reply));
}

/** Idempotency-Key may come bare or as an RFC 8941 string ("..."). */
export function idempotencyKeyOf(request: FastifyRequest): string {
  const raw = request.headers["idempotency-key"];
  return typeof raw === "string" ? raw.trim() : "";
}
