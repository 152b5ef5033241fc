// backends: embedded
/**
 * Issue 34, "gRPC messages flagged compressed without an encoding are
 * accepted": the flags byte of a request envelope (gRPC, gRPC-Web, Connect
 * streaming) may be 0, or 1 with the message's encoding declared (gRPC
 * PROTOCOL-HTTP2: "If the Message-Encoding header is omitted then the
 * Compressed-Flag must be 0"). Anything else is INTERNAL and creates nothing,
 * on the core port (grpc-js's unary calls and Connect's protocols alike) and
 * on the gateway port's gRPC-Web. Raw HTTP/2 and HTTP/1.1 clients send the
 * hand-made frames.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  CreateGenerationRequestSchema, GetBalanceRequestSchema, WatchJobRequestSchema,
} from "../../gen/generation/v1/generation_service_pb.js";
import { call, createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";
import { connectEndStreamOf, connectH2, envelope, grpcStatusOf, grpcWebStatusOf, rawCall, type RawAnswer } from "./edge-helpers.js";

const GENERATION = "/generation.v1.GenerationService";

const creation = () =>
  toBinary(CreateGenerationRequestSchema, create(CreateGenerationRequestSchema, {
    model: "aimodel-2.5-flash-image", prompt: "a lighthouse", aspectRatio: "1:1",
  }));

/** Flags no request envelope may carry: compressed with no encoding is checked separately. */
const INVALID_FLAGS = [0x80, 0x02, 0x03, 0xff];

describe("request envelopes whose flags the protocol does not allow", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(async () => {
    await service?.close();
  });

  async function h2(path: string, headers: Record<string, string>, chunks: Uint8Array[]): Promise<RawAnswer> {
    const session = connectH2(service.grpcUrl);
    try {
      return await rawCall(session, path, headers, chunks);
    } finally {
      session.destroy();
    }
  }

  const grpcHeaders = (customer: Customer, extra: Record<string, string> = {}) => ({
    "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${customer.apiKey}`, ...extra,
  });

  async function assertNothingCreated(customer: Customer) {
    const jobs = await call(service, "GET", "/api/v1/jobs", { key: customer.apiKey });
    assert.equal(jobs.status, 200, jobs.text);
    assert.deepEqual(jobs.json.jobs, [], "no job was created");
    const balance = await call(service, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.equal(balance.json.reserved, "0.00", "nothing was reserved");
  }

  it("when a gRPC CreateGeneration message is flagged compressed with no grpc-encoding (or identity), then it is INTERNAL and creates no job", async () => {
    const customer = await createCustomer(service, "10.00");
    for (const extra of [{}, { "grpc-encoding": "identity" }] as Record<string, string>[]) {
      const answer = await h2(`${GENERATION}/CreateGeneration`, grpcHeaders(customer, extra), [envelope(creation(), 1)]);
      assert.equal(grpcStatusOf(answer).code, grpc.status.INTERNAL, JSON.stringify({ extra, ...grpcStatusOf(answer) }));
    }
    await assertNothingCreated(customer);
  });

  it("when a gRPC CreateGeneration envelope carries flags other than 0 and 1, then it is INTERNAL and creates no job", async () => {
    const customer = await createCustomer(service, "10.00");
    for (const flags of INVALID_FLAGS) {
      const answer = await h2(`${GENERATION}/CreateGeneration`, grpcHeaders(customer), [envelope(creation(), flags)]);
      assert.equal(grpcStatusOf(answer).code, grpc.status.INTERNAL, `flags ${flags}: ${JSON.stringify(grpcStatusOf(answer))}`);
    }
    await assertNothingCreated(customer);
  });

  it("when gRPC-Web and gRPC streaming calls on the core port carry such flags, then they are INTERNAL too", async () => {
    const customer = await createCustomer(service, "10.00");
    for (const flags of [1, ...INVALID_FLAGS]) {
      const web = await h2(`${GENERATION}/CreateGeneration`, {
        "content-type": "application/grpc-web+proto", "x-grpc-web": "1", authorization: `Bearer ${customer.apiKey}`,
      }, [envelope(creation(), flags)]);
      assert.equal(grpcWebStatusOf(web).code, grpc.status.INTERNAL, `gRPC-Web flags ${flags}: ${JSON.stringify(grpcWebStatusOf(web))}`);
      const watch = toBinary(WatchJobRequestSchema, create(WatchJobRequestSchema, { jobId: randomUUID() }));
      const streaming = await h2(`${GENERATION}/WatchJob`, grpcHeaders(customer), [envelope(watch, flags)]);
      assert.equal(grpcStatusOf(streaming).code, grpc.status.INTERNAL, `gRPC WatchJob flags ${flags}: ${JSON.stringify(grpcStatusOf(streaming))}`);
      const connect = await h2(`${GENERATION}/WatchJob`, {
        "content-type": "application/connect+proto", "connect-protocol-version": "1", authorization: `Bearer ${customer.apiKey}`,
      }, [envelope(watch, flags)]);
      assert.equal(connectEndStreamOf(connect)?.error?.code, "internal", `Connect WatchJob flags ${flags}: ${JSON.stringify(connectEndStreamOf(connect))}`);
    }
    await assertNothingCreated(customer);
  });

  it("when the gateway's gRPC-Web CreateGeneration carries such flags, then it is INTERNAL and creates no job", async () => {
    const customer = await createCustomer(service, "10.00");
    for (const flags of [1, ...INVALID_FLAGS]) {
      const response = await fetch(`${service.url}${GENERATION}/CreateGeneration`, {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", authorization: `Bearer ${customer.apiKey}` },
        body: envelope(creation(), flags),
      });
      const body = Buffer.from(await response.arrayBuffer());
      const headers = Object.fromEntries(response.headers);
      const status = grpcWebStatusOf({ status: response.status, headers, trailers: {}, body, rstCode: undefined, ms: 0 });
      assert.equal(status.code, grpc.status.INTERNAL, `flags ${flags}: ${JSON.stringify(status)}`);
    }
    await assertNothingCreated(customer);
  });

  it("when a gRPC message is compressed under a declared grpc-encoding, then it is served (flag 1 with gzip)", async () => {
    const customer = await createCustomer(service, "10.00");
    const answer = await h2(`${GENERATION}/CreateGeneration`, grpcHeaders(customer, { "grpc-encoding": "gzip" }), [envelope(gzipSync(creation()), 1)]);
    assert.equal(grpcStatusOf(answer).code, grpc.status.OK, JSON.stringify(grpcStatusOf(answer)));
    const jobs = await call(service, "GET", "/api/v1/jobs", { key: customer.apiKey });
    assert.equal(jobs.json.jobs.length, 1);
  });
});

describe("the error texts of gRPC unary calls on the core port", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "1.00");
  });
  after(async () => {
    await service?.close();
  });

  it("when a unary call sends two messages or none, then it is refused naming a unary method, not a server streaming one", async () => {
    const balance = toBinary(GetBalanceRequestSchema, create(GetBalanceRequestSchema, {}));
    const headers = { "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${customer.apiKey}` };
    for (const chunks of [[envelope(balance), envelope(balance)], []]) {
      const session = connectH2(service.grpcUrl);
      try {
        const answer = await rawCall(session, `${GENERATION}/GetBalance`, headers, chunks);
        const status = grpcStatusOf(answer);
        assert.equal(status.code, grpc.status.UNIMPLEMENTED, JSON.stringify(status));
        assert.doesNotMatch(status.message, /server streaming/);
      } finally {
        session.destroy();
      }
    }
  });
});
