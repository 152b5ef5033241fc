import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type CallOptions, type HandlerContext } from "@connectrpc/connect";
import { AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import { ANSWER_DELIVERY, CLIENT_ADDRESS, type CoreClients } from "../../core/index.js";
import { httpErrorOf } from "../http/error-replies.js";
import { credentialsOf } from "./credentials.js";

type Forward = (request: unknown, options: CallOptions) => unknown;

/** Copies the provider's time the core reported (its Server-Timing) from `from` to `to`, when there is one. */
function copyTiming(from: Headers, to: Headers): void {
  const timing = from.get("server-timing");
  if (timing) to.set("server-timing", timing);
}

/** A forwarded call's options: only the credentials, client address, signal, deadline left; with `timing`, the core's Server-Timing back. */
function callOptions(context: HandlerContext, timing: "header" | "trailer" | undefined): CallOptions {
  const timeoutMs = context.timeoutMs();
  const values = createContextValues().set(CLIENT_ADDRESS, context.values.get(CLIENT_ADDRESS));
  // A creation's delivery goes along to an in-process core (a remote one hears of a reset through the call's signal).
  const delivery = context.values.get(ANSWER_DELIVERY);
  if (delivery) values.set(ANSWER_DELIVERY, delivery);
  return {
    headers: credentialsOf(context.requestHeader), signal: context.signal, contextValues: values,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    ...(timing === "header" ? { onHeader: (header: Headers) => copyTiming(header, context.responseHeader) } : {}),
    ...(timing === "trailer" ? { onTrailer: (trailer: Headers) => copyTiming(trailer, context.responseTrailer) } : {}),
  };
}

/** The core's error as the caller gets it, none of its headers but Server-Timing; a fault of ours leaves as "internal error". */
function passedOn(error: unknown, context: HandlerContext, timing: boolean): ConnectError {
  // The caller's deadline passed (the call's signal says so, or it is about to): that is the answer,
  // whatever the aborted forward reported (its own copy of the deadline may fire first, as a cancel).
  const ended = context.signal.aborted ? ConnectError.from(context.signal.reason) : undefined;
  if (ended?.code === Code.DeadlineExceeded || (context.timeoutMs() ?? 1) <= 0) {
    return new ConnectError("the operation timed out", Code.DeadlineExceeded);
  }
  const received = ConnectError.from(error);
  let answer: ConnectError;
  if (!context.signal.aborted && httpErrorOf(received).reason === "internal_error") {
    answer = new ConnectError("internal error", received.code === Code.Unknown ? Code.Internal : received.code, undefined, undefined, error);
  } else {
    answer = new ConnectError(received.rawMessage, received.code);
    answer.details = received.details;
  }
  if (timing) copyTiming(received.metadata, answer.metadata);
  return answer;
}

/** A service whose every method calls the same method of the core's client (read per call: the core may not exist yet). */
function forwarding(service: DescService, clientOf: () => object, timing: boolean): Record<string, unknown> {
  const implementation: Record<string, unknown> = {};
  for (const method of service.methods) {
    const forward: Forward = (request, options) => (clientOf() as Record<string, Forward>)[method.localName]!(request, options);
    if (method.methodKind === "unary") {
      implementation[method.localName] = async (request: unknown, context: HandlerContext) => {
        try {
          return await forward(request, callOptions(context, timing ? "header" : undefined));
        } catch (error) {
          throw passedOn(error, context, timing);
        }
      };
    } else if (method.methodKind === "server_streaming") {
      implementation[method.localName] = async function* (request: unknown, context: HandlerContext) {
        try {
          yield* forward(request, callOptions(context, timing ? "trailer" : undefined)) as AsyncIterable<unknown>;
        } catch (error) {
          throw passedOn(error, context, timing);
        }
      };
    } else {
      throw new Error(`${service.typeName}/${method.name}: only unary and server-streaming methods are forwarded`);
    }
  }
  return implementation;
}

/** The core's services, by their clients' names in CoreClients. */
const FORWARDED = [[GenerationService, "generation"], [TextService, "text"], [AdminService, "admin"], [AccountService, "account"], [FileService, "files"]] as const;

/** The core's services as a port serves them: forwarded to the core's clients, so the core's interceptors run once. */
export function forwardedServices(clients: CoreClients, timing = false): [DescService, object][] {
  return FORWARDED.map(([service, name]) => [service, forwarding(service, () => clients[name], timing)]);
}
