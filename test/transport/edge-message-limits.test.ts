// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { DEFAULT_LIMITS, KIB, MIB } from "../../src/domain/validation/limits.js";
import { inputMessageLimit } from "../../src/transport/rpc/method-policy.js";
import { ADMIN_TOKEN, createCustomer, eventually, startTestService, type Customer, type TestService } from "../support/harness.js";
import { bearer, errorDetailOf, grpcAddress, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";
import { connectErrorOf, connectH2, envelope, grpcStatusOf, rawCall, rawGrpcUnary, type RawAnswer } from "./edge-helpers.js";

const MAX_BODY = 64 * KIB;
const MAX_INPUT = 1 * MIB;
const LARGE_UPLOAD = 256 * KIB;
const IMAGE_LIMIT = inputMessageLimit({ ...DEFAULT_LIMITS, maxInputImages: DEFAULT_LIMITS.maxInputImages, maxInputBytes: MAX_INPUT }, MAX_BODY);
const GRPC = { "content-type": "application/grpc", te: "trailers" };

/** `promise`, or a failure naming `what` once `ms` have passed: no wait in this file is unbounded. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

describe("message size limits per method on the core port", () => {
  let service: TestService;
  let customer: Customer;
  let generation: grpc.Client;
  let admin: grpc.Client;
  before(async () => {
    service = await startTestService({
      MAX_BODY_BYTES: String(MAX_BODY),
      MAX_INPUT_BYTES: String(MAX_INPUT),
      LARGE_UPLOAD_BYTES: String(LARGE_UPLOAD),
      MAX_CONCURRENT_LARGE_UPLOADS: "1",
    });
    customer = await createCustomer(service, "100.00");
    const pkg = loadGrpcPackage();
    generation = new pkg.GenerationService!(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
    admin = new pkg.AdminService!(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    generation?.close();
    admin?.close();
    await service?.close();
  });

  const keyed = () => ({ ...GRPC, authorization: `Bearer ${customer.apiKey}` });

  /** A call that sends only the 5-byte prefix announcing `announced` bytes, and waits (at most 5 s) for the answer. */
  async function announceOnly(path: string, announced: number, headers: Record<string, string> = keyed()): Promise<RawAnswer> {
    const session = connectH2(service.grpcUrl);
    try {
      return await within(rawCall(session, path, headers, [envelope(new Uint8Array(), 0, announced)], false), 5_000, `${path}: an answer`);
    } finally {
      session.destroy();
    }
  }

  it("when a GetBalance message's length prefix is over MAX_BODY_BYTES, then it is refused INVALID_ARGUMENT input_too_large before the message is sent", async () => {
    const answer = await announceOnly("/generation.v1.GenerationService/GetBalance", MAX_BODY + 1);
    const status = grpcStatusOf(answer);
    assert.equal(status.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(status));
    assert.equal(status.details[0]?.reason, "input_too_large");
    assert.equal(status.details[0]?.httpStatus, 422);
    assert.equal(status.details[0]?.facts?.limit, MAX_BODY);
    assert.equal(answer.rstCode, 0);
  });

  it("when an admin sends grpc-js a 2 MiB CreateAccount message, then it is refused INVALID_ARGUMENT input_too_large", async () => {
    const { error } = await rawGrpcUnary(admin, "/generation.v1.AdminService/CreateAccount", Buffer.alloc(2 * MIB, 1), bearer(ADMIN_TOKEN));
    assert.equal(error?.code, grpc.status.INVALID_ARGUMENT, `${error?.code} ${error?.details}`);
    assert.equal(errorDetailOf(error!).details[0]?.reason, "input_too_large");
  });

  it("when a CreateGeneration message is over the input-image limit, then it is refused with that limit; below it a message larger than MAX_BODY_BYTES is accepted", async () => {
    const refused = await announceOnly("/generation.v1.GenerationService/CreateGeneration", IMAGE_LIMIT + 1);
    const status = grpcStatusOf(refused);
    assert.equal(status.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(status));
    assert.equal(status.details[0]?.reason, "input_too_large");
    assert.equal(status.details[0]?.facts?.limit, IMAGE_LIMIT);
    assert.ok(IMAGE_LIMIT > Math.ceil((MAX_INPUT * 4) / 3), "base64 of MAX_INPUT_BYTES fits");

    const image = randomBytes(100 * KIB).toString("base64");
    const created = await unary(generation, "CreateGeneration", {
      model: "aimodel-2.5-flash-image", prompt: "a lighthouse", aspectRatio: "1:1", inputImagesBase64: [image],
    }, bearer(customer.apiKey));
    assert.ok(created.jobId, "accepted");
  });

  it("when a Connect call's Content-Length is over the limit, then it gets HTTP 400 invalid_argument with input_too_large before its body", async () => {
    const session = connectH2(service.grpcUrl);
    try {
      const answer = await within(rawCall(session, "/generation.v1.GenerationService/GetBalance", {
        "content-type": "application/proto",
        "connect-protocol-version": "1",
        "content-length": String(MAX_BODY + 1),
        authorization: `Bearer ${customer.apiKey}`,
      }, [], false), 5_000, "the Connect refusal");
      assert.equal(answer.status, 400, answer.body.toString());
      const error = connectErrorOf(JSON.parse(answer.body.toString("utf8")));
      assert.equal(error.code, "invalid_argument");
      assert.equal(error.details[0]?.reason, "input_too_large");
      assert.equal(error.details[0]?.httpStatus, 422);
    } finally {
      session.destroy();
    }
  });

  it("when every large-upload slot is taken, then another large message is refused RESOURCE_EXHAUSTED too_many_uploads with retry-after, small calls go on, and the slot is free again when the upload ends", async () => {
    // The key is known to the edge's cache, so the credential checks take no store round trip.
    await unary(generation, "GetBalance", {}, bearer(customer.apiKey));
    // Two large CreateGeneration calls that send their prefix and a little, on one connection: whichever the core
    // admits first holds the one slot (and stays unanswered), the other is refused from its prefix alone. (A probe
    // sent after one holder could otherwise win the slot first, when the holder's credential check is slower.)
    const holder = connectH2(service.grpcUrl);
    const contenders = [0, 1].map(() => {
      const entry = {} as { stream: http2.ClientHttp2Stream; answer: Promise<RawAnswer> };
      entry.answer = rawCall(holder, "/generation.v1.GenerationService/CreateGeneration", keyed(), [envelope(Buffer.alloc(KIB), 0, 2 * LARGE_UPLOAD)], false,
        (s) => (entry.stream = s));
      return entry;
    });
    try {
      const loser = await within(Promise.race(contenders.map(async (entry) => (await entry.answer, entry))), 5_000, "one large upload to be refused");
      const refused = await loser.answer;
      assert.equal(grpcStatusOf(refused).code, grpc.status.RESOURCE_EXHAUSTED, JSON.stringify(grpcStatusOf(refused)));
      const holding = contenders.find((entry) => entry !== loser)!;
      // Another one, on a connection of its own, is refused too while the slot is held.
      assert.equal(grpcStatusOf(await announceOnly("/generation.v1.GenerationService/CreateGeneration", 2 * LARGE_UPLOAD)).code, grpc.status.RESOURCE_EXHAUSTED);
      const [detail] = grpcStatusOf(refused).details;
      assert.equal(detail?.reason, "too_many_uploads");
      assert.equal(detail?.httpStatus, 429);
      assert.ok(detail!.retryAfterSeconds > 0, "retry-after in the ErrorDetail");

      const { balance } = await unary(generation, "GetBalance", {}, bearer(customer.apiKey));
      assert.equal(balance.balance, "100.00", "small calls are served meanwhile");

      holding.stream.close(http2.constants.NGHTTP2_CANCEL);
      await within(holding.answer, 5_000, "the cancelled upload's stream to close");
      const image = randomBytes(LARGE_UPLOAD).toString("base64");
      const created = await eventually(
        () => unary(generation, "CreateGeneration", {
          model: "aimodel-2.5-flash-image", prompt: "a kite", aspectRatio: "1:1", inputImagesBase64: [image],
        }, bearer(customer.apiKey)).catch((error: grpc.ServiceError) => error),
        (result) => !(result instanceof Error && (result as grpc.ServiceError).code === grpc.status.RESOURCE_EXHAUSTED),
        { timeoutMs: 5_000, what: "the slot to be given back" },
      );
      assert.ok(!(created instanceof Error), `accepted once the slot is free: ${created instanceof Error ? (created as grpc.ServiceError).details : ""}`);
      assert.ok(created.jobId);
    } finally {
      holder.destroy();
    }
  });

  it("when credentials are missing, then a large message is refused UNAUTHENTICATED and takes no upload slot", async () => {
    const error = await rpcError(unary(generation, "CreateGeneration", { model: "aimodel-2.5-flash-image", prompt: "x", inputImagesBase64: [randomBytes(LARGE_UPLOAD).toString("base64")] }));
    assert.equal(error.code, grpc.status.UNAUTHENTICATED);
    const created = await unary(generation, "CreateGeneration", {
      model: "aimodel-2.5-flash-image", prompt: "a boat", aspectRatio: "1:1", inputImagesBase64: [randomBytes(LARGE_UPLOAD).toString("base64")],
    }, bearer(customer.apiKey));
    assert.ok(created.jobId);
  });
});
