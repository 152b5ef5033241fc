// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { call, createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";

/**
 * What fuzzing the service against its own document (openapi-fuzz.test.ts)
 * led to, each kept by a focused test through the real HTTP port.
 *
 * The document as a fuzzer (or a client generator) follows it: without links,
 * Schemathesis never read a job it had created (jobIds are not guessable), so
 * a finished job's answer was never checked against its schema; without a
 * model example, it never reached a text model's 200 answer on the vendor
 * surface; without `required` on the headers every 202 carries (Location, and
 * a deprecated alias' Deprecation and Link), their presence was never checked.
 */

interface Link {
  operationId: string;
  parameters: Record<string, string>;
}
interface Operation {
  operationId: string;
  parameters?: { name: string; in: string; example?: unknown }[];
  responses: Record<string, { links?: Record<string, Link>; headers?: Record<string, { required?: boolean; schema: Record<string, unknown> }> }>;
}
type Document = { paths: Record<string, Record<string, Operation>> };

function operations(document: Document): Map<string, { path: string; method: string; operation: Operation }> {
  const byId = new Map<string, { path: string; method: string; operation: Operation }>();
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) byId.set(operation.operationId, { path, method, operation });
  }
  return byId;
}

/** A link's target path with its parameters taken from an answer body (`$response.body#/field`). */
function follow(link: Link, byId: ReturnType<typeof operations>, body: Record<string, unknown>): string {
  const target = byId.get(link.operationId);
  assert.ok(target, `the link's target ${link.operationId} is an operation of the document`);
  return target.path.replace(/\{(\w+)\}/g, (_whole, name: string) => {
    const expression = link.parameters[name];
    assert.ok(expression?.startsWith("$response.body#/"), `the link gives {${name}} from the answer body`);
    return encodeURIComponent(String(body[expression.slice("$response.body#/".length)]));
  });
}

describe("when the OpenAPI document is read as a fuzzer reads it", () => {
  let service: TestService;
  let customer: Customer;
  let document: Document;
  let byId: ReturnType<typeof operations>;
  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "10.00");
    document = (await call(service, "GET", "/openapi.json")).json as Document;
    byId = operations(document);
  });
  after(() => service?.close());

  it("when a job is created, then the 202 answer's link leads to GET /api/v1/jobs/{jobId}, which reads that very job", async () => {
    for (const id of ["createGeneration", "createVideoInteraction", "textGenerations_aimodel_3_pro_image"]) {
      const link = byId.get(id)?.operation.responses["202"]?.links?.getJob;
      assert.deepEqual(link, { operationId: "getJob", parameters: { jobId: "$response.body#/job_id" } }, `${id} links to getJob`);
    }
    const created = await call(service, "POST", "/api/v1/generations", {
      key: customer.apiKey,
      body: { model: "aimodel-3-pro-image", prompt: "a lighthouse at dusk", aspect_ratio: "16:9", resolution: "2K" },
    });
    assert.equal(created.status, 202, created.text);
    const path = follow(byId.get("createGeneration")!.operation.responses["202"]!.links!.getJob!, byId, created.json);
    const job = await call(service, "GET", path, { key: customer.apiKey });
    assert.equal(job.status, 200, job.text);
    assert.equal(job.json.job_id, created.json.job_id);
  });

  it("when an account is created, then the 201 answer links to its credits, balance, keys and webhook, and a created key links to its revocation", async () => {
    const links = byId.get("createAccount")!.operation.responses["201"]!.links!;
    assert.deepEqual(Object.keys(links).sort(), ["addCredits", "createApiKey", "getAccountBalance", "setWebhook"]);
    const account = await call(service, "POST", "/admin/v1/accounts", { admin: true, body: { name: "linked", balance: "1.50" } });
    assert.equal(account.status, 201, account.text);
    const balance = await call(service, "GET", follow(links.getAccountBalance!, byId, account.json), { admin: true });
    assert.equal(balance.status, 200, balance.text);
    assert.equal(balance.json.balance, "1.50");

    const keyLink = byId.get("createApiKey")!.operation.responses["201"]!.links!.revokeApiKey!;
    const key = await call(service, "POST", follow(links.createApiKey!, byId, account.json), { admin: true, body: { models: ["*"] } });
    assert.equal(key.status, 201, key.text);
    const revoked = await call(service, "DELETE", follow(keyLink, byId, key.json), { admin: true });
    assert.equal(revoked.status, 200, revoked.text);
    assert.deepEqual(revoked.json, { key_id: key.json.key_id, revoked: true });
  });

  it("when the vendor surface's {model} example is used, then generateContent answers 200 with text", async () => {
    const parameter = byId.get("generateContent")!.operation.parameters!.find((p) => p.in === "path" && p.name === "model");
    const example = parameter?.example;
    assert.equal(typeof example, "string", "the model path parameter carries an example");
    const answer = await call(service, "POST", `/api/aimodel/v1beta/models/${example}:generateContent`, {
      vendorKey: customer.apiKey,
      body: { contents: [{ role: "user", parts: [{ text: "Write a haiku about tides" }] }] },
    });
    assert.equal(answer.status, 200, answer.text);
    assert.ok(answer.json.candidates[0].content.parts[0].text.length > 0);
  });

  it("when a deprecated alias accepts a job, then its answer carries the Location, Deprecation and Link headers the document marks required", async () => {
    const headers = byId.get("textGenerations_aimodel_3_pro_image")!.operation.responses["202"]!.headers!;
    for (const name of ["location", "deprecation", "link"]) {
      assert.equal(headers[name]?.required, true, `${name} is required`);
      assert.equal(headers[name]?.schema["x-required"], undefined, "the marker does not leak into the published schema");
    }
    assert.equal(byId.get("createGeneration")!.operation.responses["202"]!.headers!.location?.required, true);
    assert.equal(byId.get("createGeneration")!.operation.responses["202"]!.headers!.deprecation, undefined, "the current route is not deprecated");

    const accepted = await call(service, "POST", "/api/v1/text-generations", {
      key: customer.apiKey,
      body: { prompt: "a lighthouse at dusk", aspect_ratio: "16:9" },
    });
    assert.equal(accepted.status, 202, accepted.text);
    assert.equal(accepted.headers.get("location"), accepted.json.status_url);
    assert.equal(accepted.headers.get("deprecation"), "true");
    assert.equal(accepted.headers.get("link"), '</api/v1/generations>; rel="successor-version"');
  });
});
