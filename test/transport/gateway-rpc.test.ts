// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../gen/generation/v1/file_service_pb.js";
import { ErrorDetailSchema, GenerationService, type ErrorDetail } from "../../gen/generation/v1/generation_service_pb.js";
import { JobStatus } from "../../gen/generation/v1/job_pb.js";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";
import { loadConfig } from "../../src/config/config.js";
import { launchService } from "../../src/runtime/start-service.js";
import { ADMIN_TOKEN, createCustomer, eventually, startTestService, type TestService } from "../support/harness.js";
import { probePng } from "../support/media-probe.js";
import { drainedOrClosed, openExchange, requestHead, type RawExchange } from "../support/raw-http.js";
import { decodeStatusDetails } from "../support/rpc-helpers.js";

/**
 * Issue 9, "Browsers and HTTP/1.1 clients": GenerationService, TextService,
 * AdminService and FileService on the gateway port in Connect and gRPC-Web
 * over HTTP/1.1 (connect-node clients with httpVersion "1.1", raw sockets
 * where a test must control which bytes were sent), with the core port's
 * edge: readiness, credentials before the body, message limits, body memory,
 * every refusal in the caller's protocol.
 */

const GENERATION = "/generation.v1.GenerationService";
const KIB = 1024;

const PROTOCOLS: readonly { readonly name: string; readonly transport: (baseUrl: string) => Transport }[] = [
  { name: "Connect", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" }) },
  { name: "gRPC-Web", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }) },
];

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Runs a call that must fail and returns its ConnectError. */
async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("the call was expected to fail but succeeded");
}

function detailOf(error: ConnectError): ErrorDetail {
  const [detail] = error.findDetails(ErrorDetailSchema);
  assert.ok(detail, `no ErrorDetail on ${error.message}`);
  return detail;
}

/** A Connect unary error as the wire carries it (HTTP status and JSON), with its ErrorDetail decoded. */
function connectError(status: number, body: string) {
  const json = JSON.parse(body) as { code: string; message: string; details?: { type: string; value: string }[] };
  const detail = json.details?.find((d) => d.type === ErrorDetailSchema.typeName);
  return { status, code: json.code, message: json.message, detail: detail && fromBinary(ErrorDetailSchema, base64Decode(detail.value)) };
}

/** A raw exchange's answer once it is complete (Content-Length bytes of body), its body kept as bytes. */
async function rawAnswer(exchange: RawExchange, what: string) {
  const parse = () => {
    const end = exchange.received.indexOf("\r\n\r\n");
    if (end < 0) return undefined;
    const head = exchange.received.slice(0, end);
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? -1);
    const body = Buffer.from(exchange.received.slice(end + 4), "latin1");
    if (length < 0 || body.byteLength < length) return undefined;
    return { status: Number(head.slice(9, 12)), head, body: body.subarray(0, length) };
  };
  return (await eventually(async () => parse(), (answer) => answer !== undefined, { timeoutMs: 10_000, what }))!;
}

/** The gRPC-Web trailers in a body (a frame flagged 0x80), as name → value. */
function grpcWebTrailers(body: Buffer): Record<string, string> {
  for (let offset = 0; offset + 5 <= body.byteLength; ) {
    const length = body.readUInt32BE(offset + 1);
    if (body[offset] === 0x80) {
      const text = body.subarray(offset + 5, offset + 5 + length).toString("latin1");
      return Object.fromEntries(text.split("\r\n").filter(Boolean).map((line) => {
        const colon = line.indexOf(":");
        return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
      }));
    }
    offset += 5 + length;
  }
  throw new Error("no trailer frame in the gRPC-Web body");
}

/** The ErrorDetail of a gRPC-Web status (grpc-status-details-bin, a google.rpc.Status). */
function grpcWebDetail(trailers: Record<string, string>): ErrorDetail | undefined {
  const bin = trailers["grpc-status-details-bin"];
  return bin ? decodeStatusDetails(base64Decode(bin)).details[0] : undefined;
}

/** Posts one Connect unary JSON call with fetch. */
async function connectJson(baseUrl: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(baseUrl + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

describe("Connect and gRPC-Web on the gateway port", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(async () => {
    await service?.close();
  });

  for (const protocol of PROTOCOLS) {
    it(`when a ${protocol.name} client calls the gateway port over HTTP/1.1, then admin, balance, a job (created, replayed, polled to done, its file read) and streamed text answer as on the core port`, async () => {
      const transport = protocol.transport(service.url);
      const admin = createClient(AdminService, transport);
      const generation = createClient(GenerationService, transport);
      const text = createClient(TextService, transport);
      const files = createClient(FileService, transport);

      const account = await admin.createAccount({ name: "http1", balance: "10.00" }, { headers: bearer(ADMIN_TOKEN) });
      const key = await admin.createApiKey({ accountId: account.accountId, models: ["*"] }, { headers: bearer(ADMIN_TOKEN) });
      const headers = bearer(key.apiKey);

      const balance = await generation.getBalance({}, { headers });
      const onCore = await createClient(GenerationService, createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" }))
        .getBalance({}, { headers });
      assert.deepEqual(balance, onCore);
      assert.equal(balance.balance?.available, "10.00");

      const request = { model: "aimodel-3-pro-image", prompt: "a lighthouse at dusk", aspectRatio: "16:9", resolution: "1K", idempotencyKey: `k-${protocol.name}` };
      const created = await generation.createGeneration(request, { headers });
      assert.equal(created.status, JobStatus.QUEUED);
      assert.equal(created.replayed, false);
      const replayed = await generation.createGeneration(request, { headers });
      assert.equal(replayed.jobId, created.jobId);
      assert.equal(replayed.replayed, true);

      const done = await eventually(
        () => generation.getJob({ jobId: created.jobId }, { headers }),
        (answer) => answer.job?.status === JobStatus.DONE || answer.job?.status === JobStatus.FAILED,
        { what: `job ${created.jobId} to finish` },
      );
      assert.equal(done.job?.status, JobStatus.DONE, JSON.stringify(done.job?.error));
      const link = new URL(done.job!.result!.imageUrl!);
      const chunks: Uint8Array[] = [];
      let contentType = "";
      for await (const piece of files.readFile({
        key: decodeURIComponent(link.pathname.replace(/^\/files\//, "")),
        expires: BigInt(link.searchParams.get("expires")!),
        signature: link.searchParams.get("signature")!,
      })) {
        contentType ||= piece.contentType;
        chunks.push(piece.data);
      }
      assert.equal(contentType, "image/png");
      assert.deepEqual(probePng(Buffer.concat(chunks)), { width: 1024, height: 576 });

      let streamed = "";
      let messages = 0;
      for await (const message of text.streamGenerateContent(
        { request: { model: "aimodel-3.5-flash", contents: [{ role: "user", parts: [{ data: { case: "text", value: "Write a haiku about tides" } }] }] } },
        { headers },
      )) {
        messages++;
        for (const part of message.chunk?.candidates[0]?.content?.parts ?? []) if (part.data.case === "text") streamed += part.data.value;
      }
      assert.ok(messages > 1, `a stream of chunks, got ${messages}`);
      assert.ok(streamed.length > 0);

      // The public method answers without a key, as on the core port.
      const models = await generation.listModels({});
      assert.ok(models.models.length > 0);
    });

    it(`when a ${protocol.name} caller presents no key or a wrong one, then it gets UNAUTHENTICATED with the core's ErrorDetail, and an unknown job NOT_FOUND`, async () => {
      const generation = createClient(GenerationService, protocol.transport(service.url));
      const missing = await failure(generation.getBalance({}));
      assert.equal(missing.code, Code.Unauthenticated);
      assert.equal(detailOf(missing).reason, "missing_api_key");
      assert.equal(detailOf(missing).httpStatus, 401);
      const wrong = await failure(generation.getBalance({}, { headers: bearer("sk_wrong") }));
      assert.equal(wrong.code, Code.Unauthenticated);
      assert.equal(wrong.rawMessage, "the API key is invalid or revoked");
      assert.equal(detailOf(wrong).reason, "invalid_api_key");

      const customer = await createCustomer(service);
      const unknown = await failure(generation.getJob({ jobId: "00000000-0000-4000-8000-000000000000" }, { headers: bearer(customer.apiKey) }));
      assert.equal(unknown.code, Code.NotFound);
      assert.equal(detailOf(unknown).httpStatus, 404);
    });
  }

  it("when a caller without a key announces a 150 MB message, then UNAUTHENTICATED comes in its protocol from the headers alone: Connect's JSON error, gRPC-Web's trailer frame", async () => {
    const size = 150 * 1000 * 1000;
    const connect = await openExchange(service.url, requestHead("POST", `${GENERATION}/CreateGeneration`, {
      "content-type": "application/proto", "content-length": size,
    }));
    const connectAnswer = await rawAnswer(connect, "the Connect refusal");
    connect.socket.destroy();
    const refused = connectError(connectAnswer.status, connectAnswer.body.toString("utf8"));
    assert.equal(refused.status, 401);
    assert.equal(refused.code, "unauthenticated");
    assert.equal(refused.detail?.reason, "missing_api_key");
    assert.equal(connect.sent, 0, "not a byte of the body was sent, and it was answered");

    const grpcWeb = await openExchange(service.url, requestHead("POST", `${GENERATION}/CreateGeneration`, {
      "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "content-length": size, authorization: "Bearer sk_wrong",
    }));
    const grpcWebAnswer = await rawAnswer(grpcWeb, "the gRPC-Web refusal");
    grpcWeb.socket.destroy();
    assert.equal(grpcWebAnswer.status, 200, "gRPC-Web carries the status in its trailers");
    assert.match(grpcWebAnswer.head, /\r\ncontent-type: application\/grpc-web\+proto/i);
    const trailers = grpcWebTrailers(grpcWebAnswer.body);
    assert.equal(trailers["grpc-status"], String(Code.Unauthenticated));
    assert.equal(grpcWebDetail(trailers)?.reason, "invalid_api_key");
  });

  it("when a request message is not valid protobuf, then INVALID_ARGUMENT malformed_message (as on the core port), not INTERNAL", async () => {
    const customer = await createCustomer(service);
    const response = await fetch(`${service.url}${GENERATION}/GetJob`, {
      method: "POST",
      headers: { "content-type": "application/proto", ...bearer(customer.apiKey) },
      body: new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]),
    });
    const refused = connectError(response.status, await response.text());
    assert.equal(refused.code, "invalid_argument");
    assert.equal(refused.detail?.reason, "malformed_message");
  });

  it("when the protocol is not one the gateway port serves (gRPC needs HTTP/2; no content type), then 415 before the body is read", async () => {
    const customer = await createCustomer(service);
    for (const contentType of ["application/grpc", "text/plain"]) {
      const exchange = await openExchange(service.url, requestHead("POST", `${GENERATION}/GetBalance`, {
        "content-type": contentType, "content-length": 10 * 1000 * 1000, ...bearer(customer.apiKey),
      }));
      const answer = await rawAnswer(exchange, `the answer to ${contentType}`);
      exchange.socket.destroy();
      assert.equal(answer.status, 415, contentType);
      assert.equal(exchange.sent, 0);
    }
  });

  it("when a method or service the gateway port does not serve is called, then UNIMPLEMENTED in the caller's protocol (Connect's 404 unimplemented, gRPC-Web's grpc-status 12), never the REST shape", async () => {
    for (const path of [`${GENERATION}/Nope`, "/generation.v1.NoSuchService/GetBalance", "/grpc.health.v1.Health/Check"]) {
      const connect = await connectJson(service.url, path, {});
      assert.equal(connect.status, 404, path);
      assert.equal(connectError(connect.status, connect.text).code, "unimplemented", path);
      const grpcWeb = await fetch(service.url + path, {
        method: "POST", headers: { "content-type": "application/grpc-web+proto" }, body: new Uint8Array([0, 0, 0, 0, 0]),
      });
      assert.equal(grpcWeb.status, 200, path);
      assert.equal(grpcWeb.headers.get("grpc-status"), "12", path);
      assert.match(decodeURIComponent(grpcWeb.headers.get("grpc-message") ?? ""), /unknown method/);
    }
  });

  it("when an RPC path is asked with another method than POST (no CORS configured), then 405 and no Access-Control header", async () => {
    const response = await fetch(`${service.url}${GENERATION}/GetBalance`, {
      method: "OPTIONS", headers: { origin: "http://app.example", "access-control-request-method": "POST" },
    });
    assert.equal(response.status, 405);
    assert.equal([...response.headers.keys()].filter((name) => name.startsWith("access-control-")).length, 0);
  });
});

describe("the gateway port's message limits and body memory for RPCs", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ MAX_BODY_BYTES: "64KiB", MAX_BODY_MEMORY: "256KiB" });
  });
  after(async () => {
    await service?.close();
  });

  it("when a message is announced over its method's limit, then INVALID_ARGUMENT input_too_large before a byte of it is read", async () => {
    const customer = await createCustomer(service);
    const exchange = await openExchange(service.url, requestHead("POST", `${GENERATION}/GetBalance`, {
      "content-type": "application/proto", "content-length": 200 * KIB, ...bearer(customer.apiKey),
    }));
    const answer = await rawAnswer(exchange, "the refusal of an announced message");
    exchange.socket.destroy();
    const refused = connectError(answer.status, answer.body.toString("utf8"));
    assert.equal(refused.code, "invalid_argument");
    assert.equal(refused.detail?.reason, "input_too_large");
    assert.equal(refused.detail?.httpStatus, 422);
    assert.equal(exchange.sent, 0);
  });

  it("when a chunked message grows past its method's limit (64 KiB), then input_too_large as soon as it does, before the body is complete", async () => {
    const customer = await createCustomer(service);
    const exchange = await openExchange(service.url, requestHead("POST", `${GENERATION}/GetBalance`, {
      "content-type": "application/proto", "transfer-encoding": "chunked", ...bearer(customer.apiKey),
    }));
    // 80 KiB in five pieces, and never the final chunk: the refusal cannot wait for the body's end.
    const piece = Buffer.alloc(16 * KIB, 0x20);
    for (let i = 0; i < 5; i++) {
      exchange.sent += piece.byteLength;
      exchange.socket.write(`${piece.byteLength.toString(16)}\r\n`);
      exchange.socket.write(piece);
      if (!exchange.socket.write("\r\n")) await drainedOrClosed(exchange.socket);
    }
    const answer = await rawAnswer(exchange, "the refusal of a chunked message");
    exchange.socket.destroy();
    const refused = connectError(answer.status, answer.body.toString("utf8"));
    assert.equal(refused.code, "invalid_argument");
    assert.equal(refused.detail?.reason, "input_too_large");
    assert.equal(refused.detail?.facts?.limit, 64 * KIB);
  });

  it("when a message needs more than MAX_BODY_MEMORY holds, then UNAVAILABLE server_busy with retry_after_seconds, and a call afterwards is served with the memory given back", async () => {
    const customer = await createCustomer(service);
    // Within GetBalance's limit (64 KiB) twice over is not possible: CreateGeneration takes images, so its limit is far above the budget.
    const exchange = await openExchange(service.url, requestHead("POST", `${GENERATION}/CreateGeneration`, {
      "content-type": "application/proto", "content-length": 300 * KIB, ...bearer(customer.apiKey),
    }));
    const answer = await rawAnswer(exchange, "the refusal for want of body memory");
    exchange.socket.destroy();
    const refused = connectError(answer.status, answer.body.toString("utf8"));
    assert.equal(refused.status, 503);
    assert.equal(refused.code, "unavailable");
    assert.equal(refused.detail?.reason, "server_busy");
    assert.equal(refused.detail?.retryAfterSeconds, 1);
    assert.match(answer.head, /\r\nretry-after: 1\r\n/i);
    assert.equal(exchange.sent, 0);

    const balance = await createClient(GenerationService, createConnectTransport({ baseUrl: service.url, httpVersion: "1.1" }))
      .getBalance({}, { headers: bearer(customer.apiKey) });
    assert.equal(balance.balance?.available, "10.00");
    await eventually(async () => service.running.edge.bodyBudget.inUse, (inUse) => inUse === 0, { what: "the body memory to be given back" });
  });
});

describe("RPCs on the gateway port while the process cannot serve", () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers) await close().catch(() => undefined);
  });

  it("when its store cannot be reached at start, then every RPC is refused UNAVAILABLE service_unavailable in the caller's protocol (not the REST shape), with Retry-After", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "gen-rpc-starting-"));
    // Nothing listens on port 1: the store is "down" for as long as this test wants.
    const config = loadConfig({
      HOST: "127.0.0.1", PORT: "0", GRPC_PORT: "0", ADMIN_TOKEN, DATA_DIR: dataDir, LOG_LEVEL: "silent", DRAIN_DELAY: "0ms",
      CASSANDRA_CONTACT_POINTS: "127.0.0.1:1", KAFKA_BROKERS: "127.0.0.1:1",
    });
    const launched = await launchService(config);
    closers.push(async () => {
      await launched.close({ drain: false });
      await rm(dataDir, { recursive: true, force: true });
    });
    await eventually(() => fetch(`${launched.httpUrl}/readyz`).then((r) => r.json() as Promise<{ reason?: string }>), (r) => /cassandra/.test(r.reason ?? ""), {
      what: "/readyz to name cassandra",
    });

    for (const protocol of PROTOCOLS) {
      const refused = await failure(createClient(GenerationService, protocol.transport(launched.httpUrl)).getBalance({}, { headers: bearer("sk_any") }));
      assert.equal(refused.code, Code.Unavailable, protocol.name);
      assert.equal(detailOf(refused).reason, "service_unavailable");
      assert.ok(detailOf(refused).retryAfterSeconds > 0);
    }
    const raw = await connectJson(launched.httpUrl, `${GENERATION}/GetBalance`, {}, bearer("sk_any"));
    const refused = connectError(raw.status, raw.text);
    assert.equal(refused.status, 503);
    assert.equal(refused.code, "unavailable", "Connect's error JSON, not {\"error\": {…}}");
    assert.ok(Number(raw.headers.get("retry-after")) > 0, "Retry-After as an HTTP header too, for clients that read only that");
  });
});

describe("RPCs through a gateway in front of a remote core (CORE_URL)", () => {
  let core: TestService;
  let gateway: TestService;
  before(async () => {
    core = await startTestService();
    gateway = await startTestService({ CORE_URL: core.grpcUrl });
  });
  after(async () => {
    await gateway?.close();
    await core?.close();
  });

  it("when a call fails in the remote core, then the caller gets the core port's code, message and ErrorDetail, and none of the core's own response headers", async () => {
    const customer = await createCustomer(core);
    const path = `${GENERATION}/GetJob`;
    const body = { jobId: "00000000-0000-4000-8000-000000000000" };
    const viaGateway = await connectJson(gateway.url, path, body, bearer(customer.apiKey));
    const onCore = await createClient(GenerationService, createConnectTransport({ baseUrl: core.grpcUrl, httpVersion: "2" }))
      .getJob(body, { headers: bearer(customer.apiKey) })
      .then(() => assert.fail("the job does not exist"), (error: unknown) => ConnectError.from(error));
    const refused = connectError(viaGateway.status, viaGateway.text);
    assert.equal(refused.status, 404);
    assert.equal(refused.code, "not_found");
    assert.equal(refused.message, onCore.rawMessage);
    assert.deepEqual(refused.detail, detailOf(onCore));
    assert.equal(viaGateway.headers.get("content-type"), "application/json");
    assert.equal(viaGateway.headers.get("grpc-accept-encoding"), null, "no header of the core's answer is copied into this one");

    const balance = await createClient(GenerationService, createGrpcWebTransport({ baseUrl: gateway.url, httpVersion: "1.1" }))
      .getBalance({}, { headers: bearer(customer.apiKey) });
    assert.equal(balance.balance?.available, "10.00");
  });
});
