// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { ADMIN_TOKEN, createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";
import { bearer, errorDetailOf, grpcAddress } from "../support/rpc-helpers.js";
import {
  connectEndStreamOf, connectErrorOf, connectH2, envelope, grpcStatusOf, grpcWebStatusOf, rawCall, rawGrpcUnary, type RawAnswer,
} from "./edge-helpers.js";

/** Field 1 (a string) announcing 100 bytes and carrying one: not a protobuf message of any kind. */
const TRUNCATED = Buffer.from([0x0a, 0x64, 0x61]);
/** A tag with wire type 7, which protobuf does not have. */
const BAD_WIRE_TYPE = Buffer.from([0x0f, 0x01]);

describe("malformed messages and unknown methods on the core port", () => {
  let service: TestService;
  let customer: Customer;
  let client: grpc.Client;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "1.00");
    client = new grpc.Client(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
  });
  after(async () => {
    client?.close();
    await service?.close();
  });

  async function raw(path: string, headers: Record<string, string>, chunks: Uint8Array[]): Promise<RawAnswer> {
    const session = connectH2(service.grpcUrl);
    try {
      return await rawCall(session, path, headers, chunks);
    } finally {
      session.destroy();
    }
  }

  it("when grpc-js sends bytes that are not protobuf, then the call fails INVALID_ARGUMENT with reason malformed_message (not INTERNAL)", async () => {
    for (const garbage of [TRUNCATED, BAD_WIRE_TYPE]) {
      const { error } = await rawGrpcUnary(client, "/generation.v1.AdminService/CreateAccount", garbage, bearer(ADMIN_TOKEN));
      assert.equal(error?.code, grpc.status.INVALID_ARGUMENT, `${error?.code} ${error?.details}`);
      const [detail] = errorDetailOf(error!).details;
      assert.equal(detail?.reason, "malformed_message");
      assert.equal(detail?.httpStatus, 400);
    }
    // The same channel still serves well-formed calls.
    const { error, response } = await rawGrpcUnary(client, "/generation.v1.GenerationService/ListModels", Buffer.alloc(0));
    assert.equal(error, null);
    assert.ok(response!.byteLength > 0);
  });

  it("when a Connect binary (application/proto) call carries bytes that are not protobuf, then it gets HTTP 400 invalid_argument", async () => {
    const answer = await raw("/generation.v1.GenerationService/GetBalance", {
      "content-type": "application/proto",
      "connect-protocol-version": "1",
      authorization: `Bearer ${customer.apiKey}`,
    }, [TRUNCATED]);
    assert.equal(answer.status, 400, answer.body.toString());
    const error = connectErrorOf(JSON.parse(answer.body.toString("utf8")));
    assert.equal(error.code, "invalid_argument");
    assert.equal(error.details[0]?.reason, "malformed_message");
  });

  it("when a Connect streaming call carries a malformed message, then its end-of-stream error is invalid_argument", async () => {
    const answer = await raw("/generation.v1.TextService/StreamGenerateContent", {
      "content-type": "application/connect+proto",
      "connect-protocol-version": "1",
      "x-vendor-api-key": customer.apiKey,
    }, [envelope(BAD_WIRE_TYPE)]);
    assert.equal(answer.status, 200);
    const end = connectEndStreamOf(answer);
    assert.equal(end?.error?.code, "invalid_argument", JSON.stringify(end));
    assert.equal(connectErrorOf(end.error).details[0]?.reason, "malformed_message");
  });

  it("when a gRPC-Web call carries a malformed message, then its trailer frame says INVALID_ARGUMENT", async () => {
    const answer = await raw("/generation.v1.AdminService/CreateAccount", {
      "content-type": "application/grpc-web+proto",
      "x-grpc-web": "1",
      authorization: `Bearer ${ADMIN_TOKEN}`,
    }, [envelope(TRUNCATED)]);
    assert.equal(grpcWebStatusOf(answer).code, grpc.status.INVALID_ARGUMENT);
  });

  it("when a gRPC client calls a method the core does not serve, then it gets a trailers-only UNIMPLEMENTED, not HTTP 404", async () => {
    for (const path of ["/generation.v1.AdminService/NoSuchMethod", "/no.such.Service/Call"]) {
      const answer = await raw(path, { "content-type": "application/grpc", te: "trailers" }, [envelope(new Uint8Array())]);
      assert.equal(answer.status, 200, path);
      assert.equal(answer.headers["grpc-status"], String(grpc.status.UNIMPLEMENTED), "the status is in the headers (trailers-only)");
      assert.equal(grpcStatusOf(answer).code, grpc.status.UNIMPLEMENTED);
      const { error } = await rawGrpcUnary(client, path, Buffer.alloc(0));
      assert.equal(error?.code, grpc.status.UNIMPLEMENTED);
      assert.match(error!.details, /unknown method/);
    }
    const connect = await raw("/no.such.Service/Call", { "content-type": "application/proto", "connect-protocol-version": "1" }, [Buffer.alloc(0)]);
    assert.equal(connect.status, 404, "Connect clients get the 404 the Connect protocol maps to unimplemented");
  });
});
