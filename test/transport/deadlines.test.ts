// backends: embedded, real
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, it } from "node:test";
import { createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";

/**
 * A caller's deadline (Connect's connect-timeout-ms) that passes while the
 * service works is answered DEADLINE_EXCEEDED (HTTP 504), on both ports:
 * never Connect's INTERNAL 500 for what the aborted store or upstream threw,
 * nor CANCELED. The simulated text model answers after SIMULATED_LATENCY_MS
 * (30 ms in tests), so a deadline of 1 or 20 ms always passes first.
 */

const PATH = "/generation.v1.TextService/GenerateContent";
const BODY = JSON.stringify({ model: "aimodel-3.5-flash", contents: [{ role: "user", parts: [{ text: "a haiku about tides" }] }] });
const DEADLINES_MS = ["1", "20"];

/** One Connect unary call over h2c on the core port: its HTTP status and JSON body. */
function coreCall(session: http2.ClientHttp2Session, headers: Record<string, string>): Promise<{ status: number; body: { code?: string } }> {
  return new Promise((resolve, reject) => {
    const request = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/json", ...headers });
    let status = 0;
    let text = "";
    request.on("response", (head) => (status = Number(head[":status"])));
    request.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
    request.on("end", () => resolve({ status, body: JSON.parse(text) as { code?: string } }));
    request.on("error", reject);
    request.end(BODY);
  });
}

describe("deadlines that pass while the service works", () => {
  let service: TestService;
  let customer: Customer;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service);
  });
  after(async () => {
    await service?.close();
  });

  it("when a Connect call's deadline passes on the core port, then DEADLINE_EXCEEDED (504), not INTERNAL", async () => {
    const session = http2.connect(service.grpcUrl);
    try {
      for (const deadline of DEADLINES_MS) {
        const answer = await coreCall(session, { "connect-timeout-ms": deadline, authorization: `Bearer ${customer.apiKey}` });
        assert.deepEqual({ status: answer.status, code: answer.body.code }, { status: 504, code: "deadline_exceeded" }, `${deadline} ms`);
      }
      const unbounded = await coreCall(session, { authorization: `Bearer ${customer.apiKey}` });
      assert.equal(unbounded.status, 200, "the same call without a deadline is answered");
    } finally {
      session.close();
    }
  });

  it("when a Connect call's deadline passes on the gateway port, then DEADLINE_EXCEEDED (504), not CANCELED", async () => {
    for (const deadline of DEADLINES_MS) {
      const response = await fetch(service.url + PATH, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-timeout-ms": deadline, authorization: `Bearer ${customer.apiKey}` },
        body: BODY,
      });
      const body = (await response.json()) as { code?: string };
      assert.deepEqual({ status: response.status, code: body.code }, { status: 504, code: "deadline_exceeded" }, `${deadline} ms`);
    }
  });
});
