import { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { isRefused } from "../../connection-limits.js";
import { answerInProgress } from "./pipelining.js";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { rawErrorResponse, replyWithError } from "../error-replies.js";
import { GatewayError } from "../gateway-error.js";

/** What the HTTP parser and the request-timeout checker report, in our terms. */
function refusalOf(code: string): GatewayError {
  switch (code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new GatewayError(408, "request_timeout", "the request (headers and body) did not arrive in time");
    case "HPE_HEADER_OVERFLOW":
      return new GatewayError(431, "headers_too_large", "the request line and headers are too large");
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return new GatewayError(413, "chunk_extensions_too_large", "the chunk extensions are too large");
    default:
      return new GatewayError(400, "malformed_request", "the request is not valid HTTP/1.1");
  }
}

/** The path of the request the socket was reading, to pick the error shape (never echoed). */
function pathOf(error: { rawPacket?: unknown }, socket: Duplex): string {
  const inFlight = socket instanceof Socket ? answerInProgress(socket)?.req.url : undefined;
  if (typeof inFlight === "string") return inFlight;
  const raw = Buffer.isBuffer(error.rawPacket) ? error.rawPacket.subarray(0, 512).toString("latin1") : "";
  return /^[A-Z]+ (\/\S*)/.exec(raw)?.[1] ?? "/";
}

/** Connections the HTTP parser gave up on, or late: the error in its surface's shape, then closed; logged without the raw request (`?key=`). */
export function clientErrorHandler(this: FastifyInstance, error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
  const code = error.code ?? "unknown";
  // A connection refused for its client's cap has had its answer; it closes on its own (limitConnections).
  if (socket instanceof Socket && isRefused(socket)) return;
  if (code === "ECONNRESET" || code === "EPIPE" || socket.destroyed) {
    this.log.debug({ code }, "client went away");
    return;
  }
  this.log.debug({ code }, "client error");
  const inFlight = socket instanceof Socket ? answerInProgress(socket) : undefined;
  if (socket.writable && !inFlight?.headersSent) {
    socket.end(rawErrorResponse(pathOf(error, socket), refusalOf(code)), () => socket.destroy());
  } else {
    socket.destroy();
  }
}

/** The longest path parameter (a job, account or key id, a model name) the router matches. */
export const MAX_PARAM_LENGTH = 100;

/** Fastify's own refusals before routing (a path that is not valid percent-encoding, an over-long path parameter). */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const tooLong = error.code === "FST_ERR_MAX_PARAM_LENGTH";
  const refusal = tooLong ? new GatewayError(414, "path_parameter_too_long", `a path parameter is longer than ${MAX_PARAM_LENGTH} characters`) : error;
  return replyWithError(refusal, request, reply);
}
