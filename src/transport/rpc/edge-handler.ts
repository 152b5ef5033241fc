import { constants, type Http2Server, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { Code, ConnectError, createContextValues, type ConnectRouter } from "@connectrpc/connect";
import { CLIENT_ADDRESS } from "../../core/auth/credential-guard.js";
import { ANSWER_DELIVERY } from "../../core/jobs/answer-delivery.js";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { GuardedCall, streamDelivery, type CallGuardSettings } from "./call-guard.js";
import type { DebugLog } from "./connection-guard.js";
import type { GrpcJsUnaryCalls } from "./grpc-js-unary.js";
import { ANSWER_WATCHED, type MethodPolicy } from "./method-policy.js";
import { malformedMessage } from "./refusals.js";
import { answerUnknownMethod, inspectParseFailure, protocolOf } from "./wire-protocol.js";

/** A body that refuses the call at Connect's first read: Connect then answers `error` in the caller's protocol. */
async function* refusing(error: ConnectError): AsyncGenerator<Uint8Array> {
  throw error;
}

/**
 * The core port's request handler, in place of connectNodeAdapter: it finds
 * the method's Connect handler by path, as that adapter does, but gives it a
 * guarded body (see GuardedCall), answers unknown methods and services as
 * UNIMPLEMENTED in each protocol's terms (answerUnknownMethod) and reports a
 * malformed protobuf message as INVALID_ARGUMENT (Connect says INTERNAL).
 */
export function createEdgeHandler(
  router: ConnectRouter,
  policies: ReadonlyMap<string, MethodPolicy>,
  settings: CallGuardSettings,
): (req: Http2ServerRequest, res: Http2ServerResponse) => void {
  const handlers = new Map<string, UniversalHandler>(router.handlers.map((handler) => [handler.requestPath, handler]));
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0]!;
    // The client reset the stream (a cancel, a passed deadline; a RST_STREAM mid-message reads as the message's end)
    // or its connection, or the stream closed before the answer was complete: one debug line per call, whatever the
    // handler and Connect's writer then make of it. The edge's own resets (closeRequestSide) are NO_ERROR, after the answer.
    req.stream.once("close", () => {
      if (req.aborted || req.stream.rstCode !== constants.NGHTTP2_NO_ERROR) settings.debug("client went away", { path, rstCode: req.stream.rstCode });
    });
    serve(req, res).catch((error: unknown) => {
      const code = ConnectError.from(error).code;
      // Aborted, Canceled: the answer could not be written to a stream the client closed (logged above).
      if (code !== Code.Aborted && code !== Code.Canceled) settings.log(`rpc ${path} failed`, error);
    });
  };

  async function serve(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const path = (req.url ?? "").split("?", 1)[0]!;
    const protocol = protocolOf(req.headers["content-type"]);
    const handler = handlers.get(path);
    const policy = policies.get(path);
    if (!handler || !policy) {
      answerUnknownMethod(req, res, protocol);
      return;
    }
    const call = new GuardedCall(req, policy, protocol, settings);
    const values = createContextValues();
    if (ANSWER_WATCHED.has(policy.method)) values.set(ANSWER_DELIVERY, streamDelivery(req.stream));
    const request = universalRequestFromNodeRequest(req, res, undefined, values);
    const client = settings.callerOf(req.stream.session, request.header);
    values.set(CLIENT_ADDRESS, client);
    const refusal = await call.refusalBeforeBody(request.header, client);
    let response = await handler(refusal ? withoutLength(request, refusing(refusal)) : { ...request, body: call.body() });
    const inspected = await inspectParseFailure(response, protocol);
    response = inspected.parseFailure
      ? await handler(withoutLength(request, refusing(malformedMessage(`${policy.service.typeName}/${policy.method.name}`))))
      : inspected.response;
    // Connect's writer waits for an "end" event Http2ServerResponse never emits: its promise is for errors only.
    await universalResponseToNodeResponse(response, res);
  }
}

/** Connect sizes a unary Connect body by Content-Length before reading it; a refused body has none to size. */
function withoutLength(request: UniversalServerRequest, body: AsyncIterable<Uint8Array>): UniversalServerRequest {
  const header = new Headers(request.header);
  header.delete("content-length");
  return { ...request, header, body };
}

type StreamListener = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => void;

/**
 * Splits the core port's streams between the two libraries that serve it:
 * gRPC calls of the unary methods go to grpc-js (GrpcJsUnaryCalls), every
 * other stream (Connect, gRPC-Web, streaming methods, unknown paths) to
 * Node's compatibility layer and on to createEdgeHandler. That layer is the
 * one "stream" listener an HTTP/2 server gets once it has a request
 * listener; it is taken off and called for the streams that are not grpc-js's.
 */
export function splitStreams(
  server: Http2Server, policies: ReadonlyMap<string, MethodPolicy>, grpcUnary: GrpcJsUnaryCalls, debug: DebugLog,
): void {
  const listeners = server.listeners("stream") as StreamListener[];
  if (listeners.length !== 1) throw new Error(`the core port's HTTP/2 server has ${listeners.length} stream listeners; expected the compatibility layer's one`);
  const compatibility = listeners[0]!;
  server.removeAllListeners("stream");
  server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    const path = String(headers[constants.HTTP2_HEADER_PATH] ?? "").split("?", 1)[0]!;
    const policy = policies.get(path);
    const contentType = headers[constants.HTTP2_HEADER_CONTENT_TYPE];
    if (policy && grpcUnary.serves(policy) && typeof contentType === "string" && protocolOf(contentType) === "grpc") {
      // As createEdgeHandler: a client that reset the stream or its connection is one debug line.
      stream.once("close", () => {
        if (stream.aborted || stream.rstCode !== constants.NGHTTP2_NO_ERROR) debug("client went away", { path, rstCode: stream.rstCode });
      });
      grpcUnary.serve(stream, headers, policy);
      return;
    }
    compatibility.call(server, stream, headers, flags, rawHeaders);
  });
}
