// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { create, toBinary } from "@bufbuild/protobuf";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { HealthCheckRequestSchema } from "../../gen/grpc/health/v1/health_pb.js";
import { KIB, MIB } from "../../src/domain/validation/limits.js";
import { createCustomer, eventually, startTestService, type Customer, type TestService } from "../support/harness.js";
import { bearer, errorDetailOf, grpcAddress, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";
import { connectErrorOf, connectH2, envelope, grpcStatusOf, rawCall, type RawAnswer } from "./edge-helpers.js";
import { REPO_ROOT } from "../support/repo.js";

const PROTO_ROOT = join(REPO_ROOT, "proto");
const GRPC = { "content-type": "application/grpc", te: "trailers" };
const CREATE_GENERATION = "/generation.v1.GenerationService/CreateGeneration";

/** grpc.health.v1.Health for grpc-js, on a channel of its own. */
function healthClient(address: string): grpc.Client {
  const definition = protoLoader.loadSync("grpc/health/v1/health.proto", { includeDirs: [PROTO_ROOT], enums: String, defaults: true });
  const loaded = grpc.loadPackageDefinition(definition) as any;
  return new loaded.grpc.health.v1.Health(address, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 });
}

/**
 * A health Watch whose request message is `bytes` long (an unknown service name of that size): the core
 * reads it whole, answers SERVICE_UNKNOWN and keeps the call open. Resolves with the first answer.
 */
async function openWatch(client: grpc.Client, bytes: number) {
  const call: grpc.ClientReadableStream<{ status: string }> = (client as any).Watch({ service: "w".repeat(bytes - 4) });
  const state: { ended: boolean; error?: grpc.ServiceError } = { ended: false };
  call.on("end", () => (state.ended = true));
  const first = await new Promise<{ status: string } | grpc.ServiceError>((resolve) => {
    call.once("data", resolve);
    call.once("error", (error: grpc.ServiceError) => {
      state.error = error;
      resolve(error);
    });
  });
  call.on("error", (error: grpc.ServiceError) => (state.error ??= error));
  return { call, first, state };
}

const image = (bytes: number) => randomBytes(bytes).toString("base64");
const createGeneration = (client: grpc.Client, apiKey: string, imageBytes: number) =>
  unary(client, "CreateGeneration", {
    model: "aimodel-2.5-flash-image", prompt: "a lighthouse", aspectRatio: "1:1", inputImagesBase64: [image(imageBytes)],
  }, bearer(apiKey));

describe("MAX_BODY_MEMORY on the core port: every message being received counts, small ones too", () => {
  const BUDGET = 8 * MIB;
  const ANNOUNCED = 1 * MIB;
  const SESSIONS = 10;
  const STREAMS_PER_SESSION = 100;
  let service: TestService;
  let customer: Customer;
  let generation: grpc.Client;
  before(async () => {
    // LARGE_UPLOAD_BYTES (1 MiB) is the announced size: no message here takes an upload slot.
    service = await startTestService({ MAX_BODY_MEMORY: String(BUDGET), LARGE_UPLOAD_BYTES: String(ANNOUNCED), MAX_BODY_BYTES: String(ANNOUNCED) });
    customer = await createCustomer(service, "100.00");
    generation = new (loadGrpcPackage().GenerationService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    generation?.close();
    await service?.close();
  });

  const keyed = () => ({ ...GRPC, authorization: `Bearer ${customer.apiKey}` });

  function assertServerBusy(status: { code: number; details: { reason: string; httpStatus: number; retryAfterSeconds: number }[] }, what: string) {
    assert.equal(status.code, grpc.status.UNAVAILABLE, `${what}: ${JSON.stringify(status)}`);
    assert.equal(status.details[0]?.reason, "server_busy", what);
    assert.equal(status.details[0]?.httpStatus, 503, what);
    assert.equal(status.details[0]?.retryAfterSeconds, 1, `${what}: retry-after in the ErrorDetail, as the gateway's 503 server_busy`);
  }

  it("when a thousand calls with one key each announce a message at LARGE_UPLOAD_BYTES and send nothing more, then MAX_BODY_MEMORY of them are held and the rest refused UNAVAILABLE server_busy with retry-after; empty messages go on; once the stalled calls end, messages are admitted again", async () => {
    // The key is known to the edge's cache: a thousand credential checks take no store round trip.
    await unary(generation, "GetBalance", {}, bearer(customer.apiKey));
    const sessions = Array.from({ length: SESSIONS }, () => connectH2(service.grpcUrl));
    const answered: RawAnswer[] = [];
    const calls: Promise<void>[] = [];
    try {
      for (const session of sessions) {
        for (let i = 0; i < STREAMS_PER_SESSION; i++) {
          const call = rawCall(session, CREATE_GENERATION, keyed(), [envelope(new Uint8Array(), 0, ANNOUNCED)], false);
          // Answered: the server sent a gRPC status (a stalled call that is held ends without one, when its session goes).
          calls.push(call.then((answer) => {
            if (answer.trailers["grpc-status"] !== undefined || answer.headers["grpc-status"] !== undefined) answered.push(answer);
          }));
        }
      }
      const held = BUDGET / ANNOUNCED;
      await eventually(async () => answered.length, (n) => n >= SESSIONS * STREAMS_PER_SESSION - held, {
        timeoutMs: 30_000, what: `all but ${held} stalled calls to be refused`,
      });
      assert.equal(answered.length, SESSIONS * STREAMS_PER_SESSION - held, `${held} stalled calls hold the budget, the rest are refused`);
      for (const answer of answered) assertServerBusy(grpcStatusOf(answer), "a stalled call beyond the budget");

      // Meanwhile: an empty message takes no memory; a message with bytes is refused, by grpc-js and by a Connect unary call's Content-Length.
      const { balance } = await unary(generation, "GetBalance", {}, bearer(customer.apiKey));
      assert.equal(balance.balance, "100.00", "an empty message is served");
      const refused = await rpcError(createGeneration(generation, customer.apiKey, 10 * KIB));
      assertServerBusy({ code: refused.code, details: errorDetailOf(refused).details }, "grpc-js CreateGeneration");
      const connect = connectH2(service.grpcUrl);
      try {
        const answer = await rawCall(connect, CREATE_GENERATION, {
          "content-type": "application/proto", "connect-protocol-version": "1", "content-length": String(64 * KIB), authorization: `Bearer ${customer.apiKey}`,
        }, [], false);
        assert.equal(answer.status, 503, answer.body.toString());
        const error = connectErrorOf(JSON.parse(answer.body.toString("utf8")));
        assert.equal(error.code, "unavailable");
        assertServerBusy({ code: grpc.status.UNAVAILABLE, details: error.details }, "a Connect unary call refused from its Content-Length");
      } finally {
        connect.destroy();
      }
      // connect-node sends a unary message without Content-Length: what arrives of it is counted as it comes.
      const connectNode = createClient(GenerationService, createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" }));
      const connectError = await connectNode.createGeneration(
        { model: "aimodel-2.5-flash-image", prompt: "a lighthouse", aspectRatio: "1:1", inputImagesBase64: [image(10 * KIB)] },
        { headers: { authorization: `Bearer ${customer.apiKey}` } },
      ).then(() => assert.fail("refused while the budget is held"), (error: unknown) => ConnectError.from(error));
      assert.equal(connectError.code, Code.Unavailable, connectError.message);
      assertServerBusy({ code: grpc.status.UNAVAILABLE, details: connectError.findDetails(ErrorDetailSchema) }, "a connect-node unary call");
    } finally {
      for (const session of sessions) session.destroy();
    }
    await Promise.all(calls);
    const created = await eventually(
      () => createGeneration(generation, customer.apiKey, 10 * KIB).catch((error: grpc.ServiceError) => error),
      (result) => !(result instanceof Error && (result as grpc.ServiceError).code === grpc.status.UNAVAILABLE),
      { timeoutMs: 10_000, what: "the stalled calls' memory to be given back" },
    );
    assert.ok(!(created instanceof Error), `accepted once the stalled calls ended: ${created instanceof Error ? (created as grpc.ServiceError).details : ""}`);
    assert.ok(created.jobId);
  });

  it("when messages have been read whole, then their memory is free again, although their calls go on, with or without Content-Length", async () => {
    const health = healthClient(grpcAddress(service.grpcUrl));
    const watches: Awaited<ReturnType<typeof openWatch>>[] = [];
    try {
      // Twelve open calls whose messages, 1 MiB each, add up to more than MAX_BODY_MEMORY.
      for (let i = 0; i < 12; i++) {
        const watch = await openWatch(health, ANNOUNCED - 64);
        watches.push(watch);
        assert.deepEqual(watch.first, { status: "SERVICE_UNKNOWN" }, `Watch ${i + 1} was read and answered`);
      }
      const created = await createGeneration(generation, customer.apiKey, 100 * KIB);
      assert.ok(created.jobId, "a message is admitted while the twelve calls go on");
      assert.ok(watches.every((w) => !w.state.ended && w.state.error === undefined), "the Watch calls are still open");
      // Connect unary messages without Content-Length (connect-node's), counted as they arrive, give their memory back too:
      // twelve of about 800 KiB in a row add up to more than MAX_BODY_MEMORY.
      const connectNode = createClient(GenerationService, createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" }));
      for (let i = 0; i < 12; i++) {
        const job = await connectNode.createGeneration(
          { model: "aimodel-2.5-flash-image", prompt: `a lighthouse ${i}`, aspectRatio: "1:1", inputImagesBase64: [image(600 * KIB)] },
          { headers: { authorization: `Bearer ${customer.apiKey}` } },
        );
        assert.ok(job.jobId, `connect-node CreateGeneration ${i + 1} admitted`);
      }
    } finally {
      for (const watch of watches) watch.call.cancel();
      health.close();
    }
  });
});

describe("upload slots on the core port are held while a large message arrives, not while its call goes on", () => {
  const LARGE_UPLOAD = 64 * KIB;
  let service: TestService;
  let customer: Customer;
  let generation: grpc.Client;
  before(async () => {
    service = await startTestService({ LARGE_UPLOAD_BYTES: String(LARGE_UPLOAD), MAX_CONCURRENT_LARGE_UPLOADS: "1", MAX_BODY_BYTES: String(1 * MIB) });
    customer = await createCustomer(service, "100.00");
    generation = new (loadGrpcPackage().GenerationService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    generation?.close();
    await service?.close();
  });

  it("when a large message has been read whole and its call goes on (a health Watch stays open), then the one upload slot is free for the next large message", async () => {
    const first = healthClient(grpcAddress(service.grpcUrl));
    const second = healthClient(grpcAddress(service.grpcUrl));
    const watches: Awaited<ReturnType<typeof openWatch>>[] = [];
    try {
      const holder = await openWatch(first, 2 * LARGE_UPLOAD);
      watches.push(holder);
      assert.deepEqual(holder.first, { status: "SERVICE_UNKNOWN" }, "the first large message was read and answered");
      const next = await openWatch(second, 2 * LARGE_UPLOAD);
      watches.push(next);
      assert.deepEqual(next.first, { status: "SERVICE_UNKNOWN" }, `a second large message is admitted: ${(next.first as grpc.ServiceError).details ?? ""}`);
      const created = await createGeneration(generation, customer.apiKey, 2 * LARGE_UPLOAD);
      assert.ok(created.jobId, "a large CreateGeneration is admitted too");
      assert.ok(!holder.state.ended && holder.state.error === undefined, "the first Watch is still open");
    } finally {
      for (const watch of watches) watch.call.cancel();
      first.close();
      second.close();
    }
  });

  it("when a client sends a whole large message but keeps its side of the stream open (raw HTTP/2), then it keeps the slot, since Connect holds the message until the request ends; once it ends, its Watch is answered and goes on, and the slot is free", async () => {
    await unary(generation, "GetBalance", {}, bearer(customer.apiKey));
    const session = connectH2(service.grpcUrl);
    try {
      const message = toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service: "w".repeat(2 * LARGE_UPLOAD) }));
      // Two such Watch calls: whichever the core admits first holds the one slot, the other is refused.
      const contenders = [0, 1].map(() => {
        const entry = {} as { stream: http2.ClientHttp2Stream; answer: Promise<RawAnswer>; firstMessage: Promise<unknown> };
        entry.answer = rawCall(session, "/grpc.health.v1.Health/Watch", GRPC, [envelope(message)], false, (stream) => {
          entry.stream = stream;
          entry.firstMessage = new Promise((resolve) => stream.once("data", resolve));
        });
        return entry;
      });
      const loser = await Promise.race(contenders.map(async (entry) => (await entry.answer, entry)));
      assert.equal(grpcStatusOf(await loser.answer).code, grpc.status.RESOURCE_EXHAUSTED, JSON.stringify(grpcStatusOf(await loser.answer)));
      const holder = contenders.find((entry) => entry !== loser)!;
      const refused = await rpcError(createGeneration(generation, customer.apiKey, 2 * LARGE_UPLOAD));
      assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED, "refused while the holder's request is open");

      holder.stream.end();
      await holder.firstMessage;
      const created = await eventually(
        () => createGeneration(generation, customer.apiKey, 2 * LARGE_UPLOAD).catch((error: grpc.ServiceError) => error),
        (result) => !(result instanceof Error),
        { timeoutMs: 10_000, what: "the slot to be free once the holder's request ended" },
      );
      assert.ok((created as { jobId: string }).jobId);
      assert.ok(!holder.stream.closed, "the holder's Watch goes on");
    } finally {
      session.destroy();
    }
  });

  it("when a large message is still arriving, then it holds the slot: another large one is refused RESOURCE_EXHAUSTED too_many_uploads until the first has been read whole", async () => {
    await unary(generation, "GetBalance", {}, bearer(customer.apiKey));
    const session = connectH2(service.grpcUrl);
    try {
      // Two large messages (no valid CreateGeneration, which does not matter here), each sent but for its last byte:
      // whichever the core admits first holds the one slot, the other is refused.
      const payload = Buffer.alloc(2 * LARGE_UPLOAD, 1);
      const contenders = [0, 1].map(() => {
        const entry = {} as { stream: http2.ClientHttp2Stream; answer: Promise<RawAnswer> };
        entry.answer = rawCall(session, CREATE_GENERATION, { ...GRPC, authorization: `Bearer ${customer.apiKey}` },
          [envelope(payload.subarray(0, payload.byteLength - 1), 0, payload.byteLength)], false, (s) => (entry.stream = s));
        return entry;
      });
      const loser = await Promise.race(contenders.map(async (entry) => (await entry.answer, entry)));
      const [refusal] = grpcStatusOf(await loser.answer).details;
      assert.equal(grpcStatusOf(await loser.answer).code, grpc.status.RESOURCE_EXHAUSTED, JSON.stringify(grpcStatusOf(await loser.answer)));
      assert.equal(refusal?.reason, "too_many_uploads");
      assert.ok(refusal!.retryAfterSeconds > 0);
      const holder = contenders.find((entry) => entry !== loser)!;
      const refused = await rpcError(createGeneration(generation, customer.apiKey, 2 * LARGE_UPLOAD));
      assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED, "refused while the holder's message arrives");

      // The last byte: the holder's message is whole (and answered: it is no CreateGeneration request), the slot free.
      holder.stream.end(payload.subarray(payload.byteLength - 1));
      await holder.answer;
      const created = await eventually(
        () => createGeneration(generation, customer.apiKey, 2 * LARGE_UPLOAD).catch((error: grpc.ServiceError) => error),
        (result) => !(result instanceof Error),
        { timeoutMs: 10_000, what: "the slot to be free once the first message was read whole" },
      );
      assert.ok((created as { jobId: string }).jobId);
    } finally {
      session.destroy();
    }
  });
});
