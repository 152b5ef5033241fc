import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import {
  contentTypeStreamRegExp as connectStreamContentType,
  contentTypeUnaryRegExp as connectUnaryContentType,
  endStreamFlag,
  endStreamFromJson,
  errorFromJsonBytes,
} from "@connectrpc/connect/protocol-connect";
import { contentTypeRegExp as grpcContentType, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { contentTypeRegExp as grpcWebContentType, trailerFlag, trailerParse } from "@connectrpc/connect/protocol-grpc-web";

/** The protocols the core port speaks, told apart by the request's content type (as Connect's handlers do). */
export type WireProtocol = "grpc" | "grpc-web" | "connect-unary" | "connect-stream";

export function protocolOf(contentType: string | undefined): WireProtocol | undefined {
  if (!contentType) return undefined;
  if (grpcContentType.test(contentType)) return "grpc";
  if (grpcWebContentType.test(contentType)) return "grpc-web";
  if (connectUnaryContentType.test(contentType)) return "connect-unary";
  if (connectStreamContentType.test(contentType)) return "connect-stream";
  return undefined;
}

/** Whether the request body is a sequence of length-prefixed envelopes (everything but Connect's unary calls); unknown: no. */
export const isEnveloped = (protocol: WireProtocol | undefined) => protocol !== undefined && protocol !== "connect-unary";

/** The request header that names an enveloped message's encoding in `protocol` (identity when absent). */
export const messageEncodingHeader = (protocol: WireProtocol | undefined) =>
  protocol === "connect-stream" ? "connect-content-encoding" : "grpc-encoding";

/**
 * Whether a request envelope's flags byte is one a client may send: 0, or 1
 * (compressed) with an encoding other than identity declared. Anything else
 * is refused before the message is read: gRPC's libraries would read it as
 * uncompressed (grpc-js), or skip it as a trailer or end of stream (Connect).
 */
export const envelopeFlagsAllowed = (flags: number, encoding: string | undefined) =>
  flags === 0 || (flags === 1 && encoding !== undefined && encoding !== "" && encoding !== "identity");

/** How far a call got: whether the edge refused its body midway, whether its message reached the interceptors. */
export interface CallProgress {
  refused: boolean;
  invoked: boolean;
}

/** The body Connect reads, as the edge admits it; a refusal the edge throws from it is marked (see inspectParseFailure). */
export async function* admittedBody(body: AsyncIterable<Uint8Array>, progress: CallProgress): AsyncGenerator<Uint8Array> {
  try {
    yield* body;
  } catch (error) {
    progress.refused = true;
    throw error;
  }
}

export const CALL_PROGRESS = createContextKey<CallProgress | undefined>(undefined, { description: "whether the call reached its interceptors" });

/**
 * The routers' innermost interceptor: the call's message was parsed (see
 * inspectParseFailure). A unary call's is parsed before interceptors run; a
 * stream's messages are parsed as the handler pulls them.
 */
export const markInvoked: Interceptor = (next) => (request) => {
  const progress = request.contextValues.get(CALL_PROGRESS);
  if (!progress) return next(request);
  if (!request.stream) {
    progress.invoked = true;
    return next(request);
  }
  return next({ ...request, message: parsed(request.message, progress) });
};

async function* parsed<T>(messages: AsyncIterable<T>, progress: CallProgress): AsyncGenerator<T> {
  for await (const message of messages) {
    progress.invoked = true;
    yield message;
  }
}

/**
 * Connect parses a request's message itself and reports a malformed binary
 * message as INTERNAL, before any interceptor sees the call. An INTERNAL of
 * a call whose body the edge passed whole and that never reached the
 * interceptors is therefore that: the caller's fault, answered again as
 * INVALID_ARGUMENT malformed_message.
 */
function isRequestParseFailure(error: ConnectError | undefined, progress: CallProgress): boolean {
  return error !== undefined && error.code === Code.Internal && !progress.invoked && !progress.refused;
}

/**
 * Whether Connect's response is the refusal of a malformed request message,
 * in each protocol's shape: gRPC's trailers, gRPC-Web's trailer frame,
 * Connect's unary error body (HTTP 500) or end-of-stream message. Such a
 * refusal comes before any output, so only the first chunk is looked at.
 * Returns the response to send on (the same one, its first chunk put back).
 */
export async function inspectParseFailure(
  response: UniversalServerResponse,
  protocol: WireProtocol | undefined,
  progress: CallProgress,
): Promise<{ readonly parseFailure: boolean; readonly response: UniversalServerResponse }> {
  if (protocol === undefined || response.body === undefined) return { parseFailure: false, response };
  if (protocol === "connect-unary" && response.status !== 500) return { parseFailure: false, response };
  const iterator = response.body[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done === true) {
    // gRPC: an error before any message leaves the body empty and the status in the trailers.
    const failed = protocol === "grpc" && response.trailer !== undefined && isRequestParseFailure(findTrailerError(response.trailer), progress);
    return { parseFailure: failed, response: { ...response, body: emptyBody() } };
  }
  const chunk = first.value;
  let error: ConnectError | undefined;
  try {
    error = firstChunkError(chunk, protocol, response);
  } catch {
    error = undefined;
  }
  if (isRequestParseFailure(error, progress)) {
    await iterator.return?.();
    return { parseFailure: true, response };
  }
  return { parseFailure: false, response: { ...response, body: prepend(chunk, iterator) } };
}

function firstChunkError(chunk: Uint8Array, protocol: WireProtocol, response: UniversalServerResponse): ConnectError | undefined {
  const encoded = new Headers(response.header).get("content-encoding") ?? new Headers(response.header).get("connect-content-encoding");
  if (encoded && encoded !== "identity") return undefined;
  const flags = chunk[0];
  const payload = () => chunk.subarray(5);
  switch (protocol) {
    case "grpc":
      return undefined;
    case "grpc-web":
      return flags === trailerFlag ? findTrailerError(trailerParse(payload())) : undefined;
    case "connect-stream":
      return flags === endStreamFlag ? endStreamFromJson(payload()).error : undefined;
    case "connect-unary":
      return errorFromJsonBytes(chunk, undefined, new ConnectError("", Code.Unknown));
  }
}

async function* emptyBody(): AsyncGenerator<Uint8Array> {}

async function* prepend(first: Uint8Array, rest: AsyncIterator<Uint8Array>): AsyncGenerator<Uint8Array> {
  let finished = false;
  try {
    yield first;
    for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
    finished = true;
  } finally {
    // The writer stopped early (the caller went away): let Connect end the call.
    if (!finished) await rest.return?.();
  }
}
