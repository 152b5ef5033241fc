import { constants, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { Code, ConnectError, createContextValues, type ConnectRouter } from "@connectrpc/connect";
import { ANSWER_DELIVERY, CLIENT_ADDRESS } from "../../core/index.js";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { GuardedCall, streamDelivery, type CallGuardSettings } from "./call-guard.js";
import { ANSWER_WATCHED, type MethodPolicy } from "./method-policy.js";
import { malformedMessage } from "./refusals.js";
import { serverTiming } from "../server-timing.js";
import { admittedBody, answerUnknownMethod, CALL_PROGRESS, inspectParseFailure, protocolOf, type CallProgress } from "./wire-protocol.js";

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
    const arrived = performance.now();
    const path = (req.url ?? "").split("?", 1)[0]!;
    const protocol = protocolOf(req.headers["content-type"]);
    const handler = handlers.get(path);
    const policy = policies.get(path);
    if (!handler || !policy) {
      answerUnknownMethod(req, res, protocol);
      return;
    }
    const call = new GuardedCall(req, policy, protocol, settings);
    const progress: CallProgress = { refused: false, invoked: false };
    const values = createContextValues().set(CALL_PROGRESS, progress);
    if (ANSWER_WATCHED.has(policy.method)) values.set(ANSWER_DELIVERY, streamDelivery(req.stream));
    const request = universalRequestFromNodeRequest(req, res, undefined, values);
    const client = settings.callerOf(req.stream.session, request.header);
    values.set(CLIENT_ADDRESS, client);
    const refusal = await call.refusalBeforeBody(request.header, client);
    // A refusal is this service's time too (the answers' Server-Timing: serverTimingOnAnswers).
    refusal?.metadata.set("server-timing", serverTiming(performance.now() - arrived, undefined));
    if (refusal) {
      await universalResponseToNodeResponse(await handler(withoutLength(request, refusing(refusal))), res);
      return;
    }
    let response = await handler({ ...request, body: admittedBody(call.body(), progress) });
    const inspected = await inspectParseFailure(response, protocol, progress);
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
