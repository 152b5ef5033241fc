// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { once } from "node:events";
import { pino } from "pino";
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";
import { SIMULATOR_MARKERS } from "../../src/adapters/provider/simulated/simulated-provider.js";
import { DEFAULT_RPC_EDGE, listenRpc } from "../../src/transport/rpc/rpc-server.js";
import { createCustomer, eventually, startTestService, type Customer, type TestService } from "../support/harness.js";
import { bearer, loadGrpcPackage, unary } from "../support/rpc-helpers.js";
import { connectH2, envelope, rawCall } from "./edge-helpers.js";

/** A text call the simulator answers slowly (seconds, in several chunks): there is time to cancel it midway. */
const SLOW_PROMPT = `${SIMULATOR_MARKERS.slow} tell me a long story`;
const MODEL = "aimodel-3.5-flash";

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly err?: { stack?: string };
  readonly [fact: string]: unknown;
}

describe("a client that cancels its call on the core port", () => {
  let service: TestService;
  let customer: Customer;
  let rpc: Awaited<ReturnType<typeof listenRpc>>;
  let text: grpc.Client;
  let generation: grpc.Client;
  const lines: LogLine[] = [];

  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "100.00");
    // The process's pino logger at debug, its lines captured here; `log` is wired as createLog wires it (error with the stack).
    const logger = pino({ level: "debug" }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
    rpc = await listenRpc(
      service.running.core!, "127.0.0.1", 0,
      (message, error) => (error === undefined ? logger.warn(message) : logger.error({ err: error }, message)),
      service.running.readiness,
      { ...DEFAULT_RPC_EDGE, debugLog: (message, facts) => logger.debug(facts ?? {}, message) },
    );
    const pkg = loadGrpcPackage();
    text = new pkg.TextService!(`127.0.0.1:${rpc.port}`, grpc.credentials.createInsecure());
    generation = new pkg.GenerationService!(`127.0.0.1:${rpc.port}`, grpc.credentials.createInsecure());
  });
  after(async () => {
    text?.close();
    generation?.close();
    await rpc?.close();
    await service?.close();
  });

  const wentAway = (path: string) => lines.filter((line) => line.msg === "client went away" && line.path === path);

  /** What the account holds for calls being answered: "0.00" once every call has ended. */
  const reserved = async () => (await unary(generation, "GetBalance", {}, bearer(customer.apiKey))).balance.reserved as string;

  /**
   * Waits until the call's money hold is given back (its handler has finished, and logged whatever it
   * logs on its way out), then checks the log: nothing at warn or above, no stack anywhere.
   */
  async function assertQuiet() {
    await eventually(reserved, (held) => held === "0.00", { timeoutMs: 10_000, what: "the ended call's hold to be given back" });
    const loud = lines.filter((line) => line.level >= 40);
    assert.deepEqual(loud.map((line) => `${line.level} ${line.msg} ${line.err ? JSON.stringify(line.err) : ""}`), [], "no warning or error for a call its client ended");
    const withStack = lines.filter((line) => line.err !== undefined || JSON.stringify(line).includes("    at "));
    assert.deepEqual(withStack, [], "no stack");
  }

  /** As assertQuiet, and `path` has one more "client went away" line than `before`, at debug. */
  async function assertOneDebugLine(path: string, before: number) {
    await eventually(async () => wentAway(path).length, (n) => n > before, { timeoutMs: 10_000, what: `a "client went away" line for ${path}` });
    await assertQuiet();
    assert.equal(wentAway(path).length, before + 1, "one line per cancelled call");
    assert.equal(wentAway(path).at(-1)!.level, 20, "debug");
  }

  /** Resolves once the account holds money for a call: its handler is running. */
  const callHoldsMoney = () => eventually(reserved, (held) => held !== "0.00", { timeoutMs: 10_000, what: "the call to hold money" });

  const GENERATE = "/generation.v1.TextService/GenerateContent";
  const STREAM = "/generation.v1.TextService/StreamGenerateContent";
  const grpcRequest = { model: MODEL, contents: [{ role: "user", parts: [{ text: SLOW_PROMPT }] }] };

  it("when a grpc-js client cancels a unary GenerateContent while it is being answered, then the core logs one debug line and no error", async () => {
    const before = wentAway(GENERATE).length;
    const call = (text as any).GenerateContent(grpcRequest, bearer(customer.apiKey), () => {}) as grpc.ClientUnaryCall;
    await callHoldsMoney();
    call.cancel();
    await assertOneDebugLine(GENERATE, before);
  });

  it("when a grpc-js call's deadline passes while it is being answered, then the core logs no error", async () => {
    const error = await new Promise<grpc.ServiceError | null>((resolve) =>
      (text as any).GenerateContent(grpcRequest, bearer(customer.apiKey), { deadline: Date.now() + 500 }, (e: grpc.ServiceError | null) => resolve(e)),
    );
    assert.equal(error?.code, grpc.status.DEADLINE_EXCEEDED);
    await assertQuiet();
  });

  it("when a grpc-js client cancels StreamGenerateContent after its first chunk, then the core logs one debug line and no error", async () => {
    const before = wentAway(STREAM).length;
    const stream = (text as any).StreamGenerateContent({ request: grpcRequest }, bearer(customer.apiKey)) as grpc.ClientReadableStream<unknown>;
    stream.on("error", () => {});
    await new Promise((resolve) => stream.once("data", resolve));
    stream.cancel();
    await assertOneDebugLine(STREAM, before);
  });

  const connectRequest = { model: MODEL, contents: [{ role: "user", parts: [{ data: { case: "text" as const, value: SLOW_PROMPT } }] }] };
  const transports: [string, () => Transport][] = [
    ["gRPC", () => createGrpcTransport({ baseUrl: `http://127.0.0.1:${rpc.port}` })],
    ["Connect", () => createConnectTransport({ baseUrl: `http://127.0.0.1:${rpc.port}`, httpVersion: "2" })],
  ];
  for (const [protocol, transport] of transports) {
    it(`when a connect-node client (${protocol}) aborts a stream midway and a unary call while it is answered, then each is one debug line and no error`, async () => {
      const client = createClient(TextService, transport());
      const headers = { authorization: `Bearer ${customer.apiKey}` };
      let before = wentAway(STREAM).length;
      const streaming = new AbortController();
      const seen = await (async () => {
        try {
          for await (const _chunk of client.streamGenerateContent({ request: connectRequest }, { signal: streaming.signal, headers })) streaming.abort();
        } catch (error) {
          return ConnectError.from(error);
        }
        return undefined;
      })();
      assert.equal(seen?.code, Code.Canceled);
      await assertOneDebugLine(STREAM, before);

      before = wentAway(GENERATE).length;
      const unaryAbort = new AbortController();
      const answer = client.generateContent(connectRequest, { signal: unaryAbort.signal, headers }).catch((error: unknown) => ConnectError.from(error));
      await callHoldsMoney();
      unaryAbort.abort();
      assert.equal(((await answer) as ConnectError).code, Code.Canceled);
      await assertOneDebugLine(GENERATE, before);
    });
  }

  it("when a raw HTTP/2 client resets its stream (RST_STREAM CANCEL) halfway through a message, then the core logs one debug line and no error", async () => {
    const path = "/generation.v1.GenerationService/CreateGeneration";
    const before = wentAway(path).length;
    const session = connectH2(`http://127.0.0.1:${rpc.port}`);
    try {
      let stream: http2.ClientHttp2Stream | undefined;
      const answer = rawCall(session, path, { "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${customer.apiKey}` },
        [envelope(Buffer.alloc(100), 0, 4_096)], false, (s) => (stream = s));
      // A PING answered after the message's first bytes: the server has them.
      if (session.connecting) await once(session, "connect");
      await new Promise<void>((resolve, reject) => session.ping((error) => (error ? reject(error) : resolve())));
      stream!.close(http2.constants.NGHTTP2_CANCEL);
      await answer;
      await assertOneDebugLine(path, before);
    } finally {
      session.destroy();
    }
  });
});
