import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import { malformedMessage } from "./refusals.js";

/** The protocols the core port speaks, told apart by the request's content type (as Connect's handlers do). */
export type WireProtocol = "grpc" | "grpc-web" | "connect-unary" | "connect-stream";

// Each protocol's content types as its spec names them (Connect's own patterns are marked internal).
const JSON_OR_PROTO = String.raw`(?:json(?:; ?charset=utf-?8)?|proto)`;
const CONTENT_TYPES: readonly (readonly [WireProtocol, RegExp])[] = [
  ["grpc", new RegExp(String.raw`^application/grpc(?:\+${JSON_OR_PROTO})?$`, "i")],
  ["grpc-web", new RegExp(String.raw`^application/grpc-web(?:-text)?(?:\+${JSON_OR_PROTO})?$`, "i")],
  ["connect-unary", new RegExp(`^application/${JSON_OR_PROTO}$`, "i")],
  ["connect-stream", new RegExp(String.raw`^application/connect\+?${JSON_OR_PROTO}$`, "i")],
];

export const protocolOf = (contentType: string | undefined): WireProtocol | undefined =>
  contentType === undefined ? undefined : CONTENT_TYPES.find(([, pattern]) => pattern.test(contentType))?.[0];

/** Whether the request body is a sequence of length-prefixed envelopes (everything but Connect's unary calls); unknown: no. */
export const isEnveloped = (protocol: WireProtocol | undefined) => protocol !== undefined && protocol !== "connect-unary";

/** The request header that names an enveloped message's encoding in `protocol` (identity when absent). */
export const messageEncodingHeader = (protocol: WireProtocol | undefined) =>
  protocol === "connect-stream" ? "connect-content-encoding" : "grpc-encoding";

/**
 * Flags a request envelope may carry: 0, or 1 (compressed) with a real encoding declared; gRPC's libraries
 * would read anything else as uncompressed (grpc-js) or skip it as a trailer (Connect).
 */
export const envelopeFlagsAllowed = (flags: number, encoding: string | undefined) =>
  flags === 0 || (flags === 1 && encoding !== undefined && encoding !== "" && encoding !== "identity");

/** How far a call got: whether the edge refused its body midway, whether it reached the interceptors. */
export interface CallProgress {
  refused: boolean;
  invoked: boolean;
}

/** The body Connect reads, as the edge admits it; a refusal the edge throws from it is marked. */
export async function* admittedBody(body: AsyncIterable<Uint8Array>, progress: CallProgress): AsyncGenerator<Uint8Array> {
  try {
    yield* body;
  } catch (error) {
    progress.refused = true;
    throw error;
  }
}

export const CALL_PROGRESS = createContextKey<CallProgress | undefined>(undefined, { description: "whether the call reached its interceptors" });

/** Connect reports a request message that is not protobuf as INTERNAL; one the edge did not refuse is the caller's fault. */
const isParseFailure = (error: unknown, progress: CallProgress) =>
  error instanceof ConnectError && error.code === Code.Internal && !progress.refused;

/**
 * The routers' innermost interceptor: the call got past parsing (a unary call's message is parsed before the
 * interceptors); a stream's first message, parsed as the handler pulls it, is refused malformed_message here.
 */
export const markInvoked: Interceptor = (next) => (request) => {
  const progress = request.contextValues.get(CALL_PROGRESS);
  if (!progress) return next(request);
  progress.invoked = true;
  if (!request.stream) return next(request);
  return next({ ...request, message: parsed(request.message, progress, `${request.service.typeName}/${request.method.name}`) });
};

async function* parsed<T>(messages: AsyncIterable<T>, progress: CallProgress, method: string): AsyncGenerator<T> {
  let first = true;
  try {
    for await (const message of messages) {
      first = false;
      yield message;
    }
  } catch (error) {
    throw first && isParseFailure(error, progress) ? malformedMessage(method) : error;
  }
}

/** gRPC-Web's trailer frame (its flags byte), whose payload is the status as HTTP header lines. */
const GRPC_WEB_TRAILER = 0x80;
const GRPC_WEB_INTERNAL = new RegExp(`^grpc-status: ?${Code.Internal}\r?$`, "im");

/** The status of a failed unary answer, as each protocol's spec writes it (Connect's readers of it are marked internal). */
function saysInternal(response: UniversalServerResponse, body: Buffer, protocol: WireProtocol): boolean {
  switch (protocol) {
    case "grpc":
      return response.trailer?.get("grpc-status") === String(Code.Internal);
    case "grpc-web":
      return body[0] === GRPC_WEB_TRAILER && GRPC_WEB_INTERNAL.test(body.subarray(5).toString("latin1"));
    case "connect-unary":
      try {
        return response.status === 500 && (JSON.parse(body.toString("utf8")) as { code?: unknown }).code === "internal";
      } catch {
        return false;
      }
    case "connect-stream":
      return false;
  }
}

/**
 * Whether a call that never reached the interceptors (unary: Connect failed it while parsing), its body not
 * refused, was answered the INTERNAL of a malformed message; its short answer is read whole and put back otherwise.
 */
export async function inspectParseFailure(
  response: UniversalServerResponse,
  protocol: WireProtocol | undefined,
  progress: CallProgress,
): Promise<{ readonly parseFailure: boolean; readonly response: UniversalServerResponse }> {
  if (progress.invoked || progress.refused || protocol === undefined || response.body === undefined) return { parseFailure: false, response };
  const chunks: Uint8Array[] = [];
  for await (const chunk of response.body) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  if (saysInternal(response, body, protocol)) return { parseFailure: true, response };
  return { parseFailure: false, response: { ...response, body: replay(chunks) } };
}

async function* replay(chunks: readonly Uint8Array[]): AsyncGenerator<Uint8Array> {
  yield* chunks;
}
