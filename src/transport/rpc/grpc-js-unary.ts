import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { create, fromBinary, toBinary, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type HandlerContext } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import * as grpc from "@grpc/grpc-js";
import { PROVIDER_METHODS, UPSTREAM_TIME, type UpstreamTime } from "../../core/text/upstream-time.js";
import { CLIENT_ADDRESS } from "../../core/auth/credential-guard.js";
import { serverTiming } from "../server-timing.js";
import { settleFailure, wireError } from "./call-failures.js";
import { EnvelopeSizes, headerRefusal, headerValue, MessageHolds, streamDelivery, type CallGuardSettings } from "./call-guard.js";
import type { MethodPolicy } from "./method-policy.js";
import { LazyAbort, LightHandlerContext } from "./light-context.js";
import { edgeFailure, invalidMessageFlags, malformedMessage, requestTimedOut, unaryMessageCount } from "./refusals.js";
import { envelopeFlagsAllowed } from "./wire-protocol.js";
import { ANSWER_DELIVERY, type AnswerDelivery } from "../../core/jobs/answer-delivery.js";
import { ANSWER_WATCHED } from "./method-policy.js";

type UnaryImpl = (request: unknown, context: HandlerContext) => unknown;

/** What a request that is not the method's protobuf deserializes to: the handler answers INVALID_ARGUMENT (grpc-js would say INTERNAL). */
const MALFORMED: unique symbol = Symbol("malformed message");

/** grpc-js's handler of one HTTP/2 stream (Server#_streamHandler): its interceptors for this call, the stream, its headers. */
type StreamHandler = (this: grpc.Server, interceptors: grpc.ServerInterceptor[], stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

/** Why a call's signal aborts when its client cancels it or its deadline passes (one shared reason: no error built per call). */
const CANCELLED = new ConnectError("the client cancelled the call or its deadline passed", Code.Canceled);

/** Sent by grpc-js from the status itself, not as metadata. */
const statusMetadataKeys = new Set(["grpc-status", "grpc-message"]);

/** A ConnectError as grpc-js sends a status: code, message, ErrorDetail in grpc-status-details-bin, the error's metadata (and Server-Timing, when given). */
function statusOf(error: ConnectError, timing?: string): grpc.StatusObject {
  const metadata = new grpc.Metadata();
  if (timing) metadata.set("server-timing", timing);
  setTrailerStatus(new Headers(), error).forEach((value, key) => {
    if (statusMetadataKeys.has(key)) return;
    if (key.endsWith("-bin")) metadata.add(key, Buffer.from(value, "base64"));
    else metadata.add(key, value);
  });
  return { code: error.code as number as grpc.status, details: error.rawMessage, metadata };
}

/**
 * The Headers built from a call's metadata for the credential check, kept on
 * the metadata for the handler's context (a property, not a WeakMap: weak
 * tables cost the garbage collector on every call).
 */
const HEADERS: unique symbol = Symbol("headers");
/** When the call's metadata arrived (performance.now()): its Server-Timing counts from there. */
const ARRIVED: unique symbol = Symbol("arrived");
/** The client the call counts against (CallGuardSettings.callerOf). */
const CLIENT: unique symbol = Symbol("client");
/** Whether the call's answer was written whole (its stream's, told to the core for creations: ANSWER_DELIVERY). */
const DELIVERY: unique symbol = Symbol("delivery");
type WithHeaders = grpc.Metadata & { [HEADERS]?: Headers; [ARRIVED]?: number; [CLIENT]?: string; [DELIVERY]?: AnswerDelivery };

/** A call's metadata as the Headers a Connect handler reads (binary values are left out: no handler reads one). */
function headersOf(metadata: grpc.Metadata): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(metadata.getMap())) if (typeof value === "string") headers.set(key, value);
  return headers;
}

/**
 * gRPC's unary calls on the core port, served by @grpc/grpc-js (the issue-13
 * bench measured Connect's gRPC at about a third of grpc-js's rate on the same
 * call), with the same edge as every other call of the port:
 *
 * - before the message is read (grpc-js reads nothing until its interceptors
 *   let the metadata through): readiness and the method's credential;
 * - as the message arrives, from its length prefix and before a byte of it
 *   is buffered: the method's message limit, an upload slot for a large one,
 *   its share of MAX_BODY_MEMORY, all given back once the request has ended;
 * - HTTP_REQUEST_TIMEOUT for the message to arrive;
 * - a malformed message is INVALID_ARGUMENT; failures settle as on Connect
 *   (settleFailure), with ErrorDetail in grpc-status-details-bin.
 *
 * The core port's HTTP/2 server hands each gRPC stream of a unary method to
 * `serve` (splitStreams); grpc-js has no public entry for one stream of
 * a server it does not own, so this calls Server#_streamHandler, which
 * @grpc/grpc-js 1.10–1.14 share (the lockfile pins it; every test of the core
 * port's gRPC goes through it). Streaming methods, and the Connect and
 * gRPC-Web protocols, stay with Connect.
 */
export class GrpcJsUnaryCalls {
  private readonly server = new grpc.Server({
    // The edge judges each message by its own method's limit, from the length prefix, before grpc-js buffers it.
    "grpc.max_receive_message_length": -1,
    "grpc.max_send_message_length": -1,
  });
  private readonly handleStream: StreamHandler;

  constructor(
    implementations: readonly (readonly [DescService, object])[],
    private readonly settings: CallGuardSettings,
  ) {
    const handleStream = (this.server as unknown as { _streamHandler?: StreamHandler })._streamHandler;
    if (typeof handleStream !== "function") throw new Error("@grpc/grpc-js has no Server#_streamHandler: the core port cannot serve gRPC through it");
    this.handleStream = handleStream;
    for (const [service, implementation] of implementations) {
      const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
      const handlers: grpc.UntypedServiceImplementation = {};
      for (const method of service.methods) {
        if (method.methodKind !== "unary") continue;
        const impl = (implementation as Record<string, UnaryImpl>)[method.localName]!.bind(implementation);
        definition[method.localName] = methodDefinition(service, method);
        handlers[method.localName] = this.unaryHandler(service, method, impl);
      }
      if (Object.keys(definition).length > 0) this.server.addService(definition, handlers);
    }
  }

  /** Whether `policy`'s method is served here for gRPC callers. */
  serves(policy: MethodPolicy): boolean {
    return policy.method.methodKind === "unary";
  }

  /** Serves one gRPC stream of a unary method (the caller has told its protocol and found its policy). */
  serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, policy: MethodPolicy): void {
    const guard = new StreamGuard(stream, headerValue(headers["grpc-encoding"]), policy, this.settings);
    this.handleStream.call(this.server, [guard.interceptor], stream, headers);
  }

  private unaryHandler(service: DescService, method: DescMethod, impl: UnaryImpl): grpc.handleUnaryCall<unknown, unknown> {
    const name = `${service.typeName}/${method.name}`;
    const providerCalled = PROVIDER_METHODS.has(method);
    const answerWatched = ANSWER_WATCHED.has(method);
    return (call, callback) => {
      const metadata = call.metadata as WithHeaders;
      const arrived = metadata[ARRIVED] ?? performance.now();
      if (call.request === MALFORMED) {
        callback(statusOf(malformedMessage(name), serverTiming(performance.now() - arrived, undefined)));
        return;
      }
      // A text call's provider time, reported by the core (Server-Timing's upstream).
      const upstream: UpstreamTime | undefined = providerCalled ? {} : undefined;
      const timing = () => serverTiming(performance.now() - arrived, upstream?.upstreamMs);
      const aborter = new LazyAbort();
      let answered = false;
      // grpc-js also reports "cancelled" as the stream closes after the answer: only a call still running is aborted.
      call.once("cancelled", () => answered || aborter.abort(CANCELLED));
      const deadline = call.getDeadline();
      const context = new LightHandlerContext(
        service, method, "grpc", aborter, metadata[HEADERS] ?? headersOf(call.metadata),
        () => (deadline instanceof Date || Number.isFinite(deadline) ? Math.max(0, Number(deadline) - Date.now()) : undefined),
        contextValuesOf(upstream, metadata[CLIENT], answerWatched ? metadata[DELIVERY] : undefined),
      );
      let answer: Promise<unknown>;
      try {
        answer = Promise.resolve(impl(call.request, context));
      } catch (error) {
        answer = Promise.reject(error);
      }
      answer.then(
        (output) => {
          answered = true;
          const header = context.setHeader ? metadataOf(context.setHeader) : new grpc.Metadata();
          header.set("server-timing", timing());
          call.sendMetadata(header);
          callback(null, create(method.output, output as never), context.setTrailer && metadataOf(context.setTrailer));
        },
        (error: unknown) => {
          answered = true;
          const settled = settleFailure(aborter.signal, method.name, error, this.settings.log);
          callback(statusOf(wireError(settled), timing()));
        },
      );
    };
  }
}

/**
 * The call's context values: its client, where the provider's time goes for a text call, and whether a
 * creation's answer was delivered; none made when none is there.
 */
function contextValuesOf(upstream: UpstreamTime | undefined, client: string | undefined, delivery: AnswerDelivery | undefined) {
  if (!upstream && client === undefined && !delivery) return undefined;
  const values = createContextValues().set(CLIENT_ADDRESS, client);
  if (upstream) values.set(UPSTREAM_TIME, upstream);
  if (delivery) values.set(ANSWER_DELIVERY, delivery);
  return values;
}

function metadataOf(headers: Headers): grpc.Metadata {
  const metadata = new grpc.Metadata();
  headers.forEach((value, key) => metadata.add(key, value));
  return metadata;
}

/** grpc-js's description of a unary method, with protobuf-es doing the (de)serialization. */
function methodDefinition(service: DescService, method: DescMethod): grpc.MethodDefinition<unknown, unknown> {
  return {
    path: `/${service.typeName}/${method.name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: (message) => Buffer.from(toBinary(method.input, message as never)),
    requestDeserialize: (bytes) => {
      try {
        return fromBinary(method.input, bytes);
      } catch {
        return MALFORMED;
      }
    },
    responseSerialize: (message) => Buffer.from(toBinary(method.output, message as never)),
    responseDeserialize: (bytes) => fromBinary(method.output, bytes),
  };
}

/**
 * One gRPC stream on its way through grpc-js, seen from the edge (as
 * GuardedCall sees a Connect call). Its `data` listener is the stream's
 * first, so each message's length prefix is judged before grpc-js decodes a
 * byte of it; its interceptor holds the metadata until the headers are
 * admitted and keeps a refused call's message and half-close from the
 * handler, which therefore never runs for a refused call.
 */
class StreamGuard {
  /** When the stream reached the core port. */
  readonly arrived = performance.now();
  private call: grpc.ServerInterceptingCallInterface | undefined;
  private refused = false;
  /** Request messages passed on to grpc-js: a unary call takes exactly one. */
  private messages = 0;
  private readonly holds: MessageHolds;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly stream: ServerHttp2Stream,
    encoding: string | undefined,
    private readonly policy: MethodPolicy,
    private readonly settings: CallGuardSettings,
  ) {
    this.holds = new MessageHolds(policy, settings);
    this.delivery = streamDelivery(stream);
    const envelopes = new EnvelopeSizes(
      (size, flags) => {
        // grpc-js would read a message flagged compressed with no encoding (or flagged 0x80) as uncompressed.
        const refusal = envelopeFlagsAllowed(flags, encoding) ? this.holds.admitOrRefuse(size, size) : invalidMessageFlags(flags, encoding);
        if (refusal) this.refuse(refusal);
      },
      () => {},
    );
    // Registered before grpc-js's own listener (and paused by it until the metadata is admitted).
    stream.on("data", (chunk: Buffer) => {
      if (!this.refused) envelopes.feed(chunk);
    });
    this.timer = setTimeout(() => {
      if (!stream.readableEnded) this.refuse(requestTimedOut(settings.requestTimeoutMs));
    }, settings.requestTimeoutMs);
    stream.once("end", () => this.bodyRead());
    stream.once("close", () => this.bodyRead());
  }

  /** Whether the answer left whole: told to the core for creations. */
  readonly delivery: AnswerDelivery;

  private bodyRead(): void {
    clearTimeout(this.timer);
    this.holds.release();
  }

  /** Answers `refusal` (once) and closes the request side once the answer is out: nothing more of it is read. */
  private refuse(refusal: ConnectError): void {
    if (this.refused) return;
    this.refused = true;
    this.bodyRead();
    this.call?.sendStatus(statusOf(refusal, serverTiming(performance.now() - this.arrived, undefined)));
    setImmediate(() => {
      const stream = this.stream;
      if (stream.readableEnded || stream.closed || stream.destroyed) return;
      stream.resume(); // what arrives is dropped: Node destroys a closed stream only once its readable side has ended
      stream.close(constants.NGHTTP2_NO_ERROR);
    });
  }

  readonly interceptor: grpc.ServerInterceptor = (_descriptor, call) => {
    this.call = call;
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            const headers = headersOf(metadata);
            (metadata as WithHeaders)[HEADERS] = headers;
            (metadata as WithHeaders)[ARRIVED] = this.arrived;
            const client = this.settings.callerOf(this.stream.session, headers);
            (metadata as WithHeaders)[CLIENT] = client;
            (metadata as WithHeaders)[DELIVERY] = this.delivery;
            headerRefusal(this.policy, this.settings, headers, client).then(
              (refusal) => {
                if (refusal) this.refuse(refusal);
                else if (!this.refused) pass(metadata);
              },
              (error: unknown) => {
                this.settings.log(`${this.policy.method.name}: edge check failed`, error);
                this.refuse(edgeFailure(error));
              },
            );
          },
          // grpc-js's own answers to a unary call with two messages or none name a "server streaming method".
          onReceiveMessage: (message, pass) => {
            if (this.refused) return;
            if (++this.messages > 1) this.refuse(unaryMessageCount(this.policy, "received a second request message"));
            else pass(message);
          },
          onReceiveHalfClose: (pass) => {
            if (this.refused) return;
            if (this.messages === 0) this.refuse(unaryMessageCount(this.policy, "received no request message"));
            else pass();
          },
        }),
    });
  };
}
