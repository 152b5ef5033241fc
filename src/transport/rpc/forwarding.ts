import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type CallOptions, type HandlerContext } from "@connectrpc/connect";
import { ANSWER_DELIVERY, CLIENT_ADDRESS, UPSTREAM_TIME } from "../../core/index.js";
import { httpErrorOf } from "../http/connect-errors.js";
import { credentialsOf } from "./credentials.js";

type Forward = (request: unknown, options: CallOptions) => unknown;

/**
 * What a forwarded call takes along to the core: the caller's credentials
 * (nothing else of its headers) and client address, its abort signal (the client went away, or
 * its deadline passed) and what is left of its deadline.
 */
function callOptions(context: HandlerContext): CallOptions {
  const timeoutMs = context.timeoutMs();
  const values = createContextValues().set(CLIENT_ADDRESS, context.values.get(CLIENT_ADDRESS));
  // A creation's delivery goes along to an in-process core (a remote one hears of a reset through the call's signal).
  const delivery = context.values.get(ANSWER_DELIVERY);
  if (delivery) values.set(ANSWER_DELIVERY, delivery);
  // So does where the provider's time is collected (a remote core reports it in its Server-Timing instead).
  const upstream = context.values.get(UPSTREAM_TIME);
  if (upstream) values.set(UPSTREAM_TIME, upstream);
  return { headers: credentialsOf(context.requestHeader), signal: context.signal, contextValues: values, ...(timeoutMs === undefined ? {} : { timeoutMs }) };
}

/**
 * The core's error as the caller gets it: code, message and details (the
 * ErrorDetail with reason, HTTP status, Retry-After), never the core's
 * response headers (a remote core's ConnectError carries them as metadata,
 * which Connect would copy into this answer). A fault of this service (what
 * the REST surface answers as internal_error: no detail, 5xx) leaves as
 * "internal error", the fault kept as its cause for the log.
 */
function passedOn(error: unknown, context: HandlerContext): ConnectError {
  // The caller's deadline passed (the call's signal says so, or it is about to): that is the answer,
  // whatever the aborted forward reported (its own copy of the deadline may fire first, as a cancel).
  const ended = context.signal.aborted ? ConnectError.from(context.signal.reason) : undefined;
  if (ended?.code === Code.DeadlineExceeded || (context.timeoutMs() ?? 1) <= 0) {
    return new ConnectError("the operation timed out", Code.DeadlineExceeded);
  }
  const received = ConnectError.from(error);
  if (!context.signal.aborted && httpErrorOf(received).reason === "internal_error") {
    return new ConnectError("internal error", received.code === Code.Unknown ? Code.Internal : received.code, undefined, undefined, error);
  }
  const answer = new ConnectError(received.rawMessage, received.code);
  answer.details = received.details;
  return answer;
}

/**
 * A service implementation whose every method calls the same method of the
 * core's client (`clientOf` is read per call: the core may not exist yet).
 * The ports' routers serve these, so every call reaches the core through the
 * one transport its clients use, and the core's interceptors run once.
 */
export function forwarding(service: DescService, clientOf: () => object): Record<string, unknown> {
  const implementation: Record<string, unknown> = {};
  for (const method of service.methods) {
    const forward: Forward = (request, options) => (clientOf() as Record<string, Forward>)[method.localName]!(request, options);
    if (method.methodKind === "unary") {
      implementation[method.localName] = async (request: unknown, context: HandlerContext) => {
        try {
          return await forward(request, callOptions(context));
        } catch (error) {
          throw passedOn(error, context);
        }
      };
    } else if (method.methodKind === "server_streaming") {
      implementation[method.localName] = async function* (request: unknown, context: HandlerContext) {
        try {
          yield* forward(request, callOptions(context)) as AsyncIterable<unknown>;
        } catch (error) {
          throw passedOn(error, context);
        }
      };
    } else {
      throw new Error(`${service.typeName}/${method.name}: only unary and server-streaming methods are forwarded`);
    }
  }
  return implementation;
}
