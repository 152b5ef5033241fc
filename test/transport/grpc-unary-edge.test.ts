// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { KIB } from "../../src/domain/validation/limits.js";
import { createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";
import { bearer, errorDetailOf, grpcAddress, loadGrpcPackage, unary } from "../support/rpc-helpers.js";

/**
 * gRPC unary calls on the core port: the edge's refusal from the length prefix must keep the handler from ever
 * running, even when the whole message came in the same chunk as its prefix.
 */
describe("gRPC unary calls behind the core port's edge", () => {
  let service: TestService;
  let customer: Customer;
  let generation: grpc.Client;
  before(async () => {
    // 8 KiB of body memory: a 9 KiB message does not fit, a 2 KiB one does; both arrive in one HTTP/2 DATA frame
    // (16 KiB), prefix and message together. No upload slot is involved.
    service = await startTestService({ MAX_BODY_MEMORY: String(8 * KIB), LARGE_UPLOAD_BYTES: String(1024 * KIB) });
    customer = await createCustomer(service, "100.00");
    generation = new (loadGrpcPackage().GenerationService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    generation?.close();
    await service?.close();
  });

  const createGeneration = (imageBytes: number) =>
    unary(generation, "CreateGeneration", {
      model: "aimodel-2.5-flash-image", prompt: "a lighthouse", aspectRatio: "1:1", inputImagesBase64: [randomBytes(imageBytes).toString("base64")],
    }, bearer(customer.apiKey));

  it("when a whole CreateGeneration message is refused from its length prefix, then no job is made and no money is held; one that fits is accepted", async () => {
    const refused = await createGeneration(7 * KIB).then(
      () => assert.fail("a 9 KiB message was accepted with 8 KiB of body memory"),
      (error: grpc.ServiceError) => error,
    );
    assert.equal(refused.code, grpc.status.UNAVAILABLE, refused.details);
    assert.equal(errorDetailOf(refused).details[0]?.reason, "server_busy");
    const untouched = await unary(generation, "GetBalance", {}, bearer(customer.apiKey));
    assert.equal(untouched.balance.reserved, "0.00", "the refused call held nothing");
    const none = await unary(generation, "ListJobs", {}, bearer(customer.apiKey));
    assert.equal(none.jobs.length, 0, "the refused call made no job");

    const accepted = await createGeneration(1 * KIB);
    assert.ok(accepted.jobId, `a message that fits is served: ${JSON.stringify(accepted)}`);
    const jobs = await unary(generation, "ListJobs", {}, bearer(customer.apiKey));
    assert.deepEqual(jobs.jobs.map((job: { jobId: string }) => job.jobId), [accepted.jobId]);
  });

  it("when a gRPC unary message is not the method's protobuf, then it is INVALID_ARGUMENT malformed_message and nothing is made", async () => {
    const garbage = new grpc.Client(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
    try {
      const error = await new Promise<grpc.ServiceError>((resolve, reject) =>
        garbage.makeUnaryRequest(
          "/generation.v1.GenerationService/CreateGeneration",
          (bytes: Buffer) => bytes,
          (bytes: Buffer) => bytes,
          Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), // field 1, length-delimited, a length far past the end
          bearer(customer.apiKey),
          (failure, answer) => (failure ? resolve(failure) : reject(new Error(`answered ${answer?.length} bytes`))),
        ),
      );
      assert.equal(error.code, grpc.status.INVALID_ARGUMENT, error.details);
      assert.equal(errorDetailOf(error).details[0]?.reason, "malformed_message");
    } finally {
      garbage.close();
    }
  });
});
