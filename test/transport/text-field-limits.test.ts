// backends: embedded, real
/**
 * Issue 34, "Unbounded names": every free-text field a client sets has a
 * documented bound (src/domain/validation/text-fields.ts): names 200
 * characters, URLs 2,048. Past it: 400 `field_too_long` on REST,
 * INVALID_ARGUMENT with the same reason and the field named in the
 * ErrorDetail on gRPC, and nothing changes.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { ADMIN_TOKEN, call, createCustomer, startTestService, type TestService } from "../support/harness.js";
import { bearer, errorDetailOf, grpcAddress, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";

const MAX_NAME = 200;
const MAX_URL = 2048;
const longUrl = (length: number) => `https://example.com/${"a".repeat(length - "https://example.com/".length)}`;

describe("bounds of free-text fields", () => {
  let service: TestService;
  let admin: grpc.Client;
  before(async () => {
    service = await startTestService();
    admin = new (loadGrpcPackage().AdminService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    admin?.close();
    await service?.close();
  });

  function assertTooLong(response: { status: number; text: string; json: any }) {
    assert.equal(response.status, 400, response.text.slice(0, 300));
    assert.equal(response.json.error.code, "field_too_long");
  }

  async function assertRpcTooLong(pending: Promise<unknown>, field: string) {
    const error = await rpcError(pending);
    assert.equal(error.code, grpc.status.INVALID_ARGUMENT, error.details.slice(0, 300));
    const [detail] = errorDetailOf(error).details;
    assert.equal(detail?.reason, "field_too_long");
    assert.equal(detail?.facts?.field, field);
    assert.equal(detail?.httpStatus, 400);
  }

  it("when an account's name is 100 KB, then REST and gRPC answer 400 field_too_long; 200 characters is accepted as sent", async () => {
    assertTooLong(await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "n".repeat(100 * 1024), balance: "1.00" } }));
    assertTooLong(await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "n".repeat(MAX_NAME + 1) } }));
    await assertRpcTooLong(unary(admin, "CreateAccount", { name: "n".repeat(100 * 1024) }, bearer(ADMIN_TOKEN)), "name");
    // Characters, not bytes: 200 emoji (800 UTF-8 bytes) are a valid name.
    for (const name of ["n".repeat(MAX_NAME), "🚀".repeat(MAX_NAME)]) {
      const created = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name } });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.json.name, name);
    }
  });

  it("when a route name to pause is over 200 characters, then gRPC answers INVALID_ARGUMENT field_too_long", async () => {
    await assertRpcTooLong(unary(admin, "SetRoutePaused", { name: "r".repeat(100 * 1024), paused: true }, bearer(ADMIN_TOKEN)), "name");
  });

  it("when a job's callback_url or an input image URL is over 2,048 characters, then the creation is 400 field_too_long and reserves nothing", async () => {
    const customer = await createCustomer(service, "1.00");
    const image = { model: "aimodel-2.5-flash-image", prompt: "a kite", aspect_ratio: "1:1" };
    assertTooLong(await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: { ...image, callback_url: longUrl(MAX_URL + 1) } }));
    assertTooLong(await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: { ...image, input_images_urls: [longUrl(MAX_URL + 1)] } }));
    const generation = new (loadGrpcPackage().GenerationService!)(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
    try {
      await assertRpcTooLong(unary(generation, "CreateGeneration", {
        model: image.model, prompt: image.prompt, aspectRatio: "1:1", callbackUrl: longUrl(MAX_URL + 1),
      }, bearer(customer.apiKey)), "callback_url");
    } finally {
      generation.close();
    }
    const balance = await call(service, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.deepEqual([balance.json.balance, balance.json.reserved], ["1.00", "0.00"]);
    const accepted = await call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: { ...image, callback_url: longUrl(MAX_URL) } });
    assert.equal(accepted.status, 202, accepted.text);
  });

  it("when an account's webhook URL is over 2,048 characters, then setting it is 400 field_too_long; 2,048 is accepted", async () => {
    const customer = await createCustomer(service, "1.00");
    const path = `/admin/v1/accounts/${customer.accountId}/webhook`;
    assertTooLong(await call(service, "PUT", path, { admin: true, body: { url: longUrl(MAX_URL + 1) } }));
    const set = await call(service, "PUT", path, { admin: true, body: { url: longUrl(MAX_URL) } });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.json.url, longUrl(MAX_URL));
  });
});
