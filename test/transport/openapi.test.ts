// backends: embedded
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { call, createCustomer, startTestService, type TestService } from "../support/harness.js";
import { documentPaths } from "../support/readme-blocks.js";
import { REPO_ROOT } from "../support/repo.js";
import { FIELD_DOCS } from "../../gen/field_docs.js";

const run = promisify(execFile);

/** Every operation the issue names, by surface: the document must list each, and nothing else. */
const OPERATIONS = [
  "get /livez", "get /readyz", "get /healthz", "get /metrics",
  "post /api/v1/generations", "get /api/v1/jobs", "get /api/v1/jobs/{jobId}", "post /api/v1/jobs/{jobId}/cancel", "get /api/v1/jobs/{jobId}/events", "get /api/v1/balance", "get /api/v1/models", "get /api/v1/ledger", "get /api/v1/usage",
  ...["/nb", "/nb2", ""].flatMap((prefix) => [`post /api/v1${prefix}/text-generations`, `post /api/v1${prefix}/url-generations`]),
  "get /api/aimodel/v1beta/models", "get /api/aimodel/v1beta/models/{model}",
  "post /api/aimodel/v1beta/models/{model}:generateContent", "post /api/aimodel/v1beta/models/{model}:streamGenerateContent",
  "post /api/aimodel/v1beta/models/{model}:countTokens", "post /api/aimodel/v1beta/interactions",
  "post /api/aimodel/v1beta/openai/chat/completions", "post /api/aimodel/v1beta/openai/images/generations", "get /api/aimodel/v1beta/openai/models", "get /api/aimodel/v1beta/openai/models/{model}",
  "post /admin/v1/accounts", "get /admin/v1/accounts", "post /admin/v1/accounts/{accountId}/credits", "post /admin/v1/accounts/{accountId}/adjustments",
  "get /admin/v1/accounts/{accountId}", "patch /admin/v1/accounts/{accountId}", "get /admin/v1/accounts/{accountId}/balance", "get /admin/v1/accounts/{accountId}/ledger", "get /admin/v1/accounts/{accountId}/usage", "get /admin/v1/audit",
  "post /admin/v1/accounts/{accountId}/keys", "get /admin/v1/keys/{keyId}", "patch /admin/v1/keys/{keyId}", "delete /admin/v1/keys/{keyId}", "post /admin/v1/keys/{keyId}/rotate", "put /admin/v1/accounts/{accountId}/webhook",
  "get /admin/v1/panel-sessions", "delete /admin/v1/panel-sessions/{sessionId}",
  "put /admin/v1/pause", "put /admin/v1/models/{model}/pause", "get /admin/v1/routes", "put /admin/v1/routes/{name}/pause",
  "get /admin/v1/prices", "put /admin/v1/prices/{model}", "put /admin/v1/prices/tools/{tool}", "delete /admin/v1/prices/tools/{tool}",
  "get /files/{key}",
  "post /panel/session", "get /panel/session", "delete /panel/session",
].sort();

const METHODS = new Set(["get", "put", "post", "delete", "patch", "head", "options"]);

interface Operation {
  readonly method: string;
  readonly path: string;
  readonly spec: {
    operationId?: string;
    security?: unknown[];
    requestBody?: { content: Record<string, { schema: { examples?: unknown[] }; example?: unknown; examples?: Record<string, { value: unknown }> }> };
    responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  };
}

function operationsOf(document: { paths: Record<string, Record<string, unknown>> }): Operation[] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.has(method))
      .map(([method, spec]) => ({ method, path, spec: spec as Operation["spec"] })),
  );
}

/** Every JSON object written as a shell literal ('{…}') in the sh blocks of the README and of the docs beside it: what a reader sends. */
async function readmeBodies(): Promise<unknown[]> {
  const documents = await Promise.all(documentPaths().map((path) => readFile(join(REPO_ROOT, path), "utf8")));
  const blocks = documents.flatMap((markdown) => [...markdown.matchAll(/```sh[^\n]*\n([\s\S]*?)```/g)].map((match) => match[1]!));
  return blocks.flatMap((block) => [...block.matchAll(/'(\{[^']*\})'/g)].map((match) => JSON.parse(match[1]!) as unknown));
}

describe("the published contract (OpenAPI 3.1 at /openapi.json, Swagger UI at /docs)", () => {
  let service: TestService;
  let document: { openapi: string; paths: Record<string, Record<string, unknown>>; components: { securitySchemes: Record<string, unknown> } };
  let workDir: string;

  before(async () => {
    service = await startTestService();
    workDir = await mkdtemp(join(tmpdir(), "openapi-test-"));
    const response = await fetch(`${service.url}/openapi.json`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /application\/json/);
    document = (await response.json()) as typeof document;
  });
  after(async () => {
    await service?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it("when the document is read, then it is OpenAPI 3.1 and lists exactly the operations of every surface", () => {
    assert.equal(document.openapi, "3.1.0");
    const listed = operationsOf(document).map(({ method, path }) => `${method} ${path}`).sort();
    assert.deepEqual(listed, OPERATIONS);
  });

  it("when the document is linted with Redocly's recommended rules, then there is no error and no warning", async () => {
    const file = join(workDir, "openapi.json");
    await writeFile(file, JSON.stringify(document));
    const bin = join(REPO_ROOT, "node_modules/.bin/redocly");
    const { stdout } = await run(bin, ["lint", file, "--format=json"], { env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" } })
      .catch((error: { stdout?: string; stderr?: string }) => {
        assert.fail(`redocly lint failed:\n${error.stdout ?? ""}${error.stderr ?? ""}`);
      });
    const report = JSON.parse(stdout.slice(stdout.indexOf("{"))) as { totals: { errors: number; warnings: number }; problems: unknown[] };
    assert.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 }, JSON.stringify(report.problems, null, 2));
  });

  it("when an operation is read, then it has an id, its credentials, a schema for its JSON body and for each of its JSON answers, and its errors", () => {
    const ids = new Set<string>();
    for (const { method, path, spec } of operationsOf(document)) {
      const name = `${method} ${path}`;
      assert.ok(spec.operationId && !ids.has(spec.operationId), `${name}: a unique operationId`);
      ids.add(spec.operationId);
      assert.ok(Array.isArray(spec.security), `${name}: security declared (empty when no credential is needed)`);
      if (spec.requestBody) assert.ok(spec.requestBody.content["application/json"]?.schema, `${name}: a JSON body schema`);
      // POST /panel/session takes its credential in Authorization and nothing else: the one write without a body.
      if ((method === "post" || method === "put") && name !== "post /panel/session") assert.ok(spec.requestBody, `${name}: a request body`);
      const statuses = Object.keys(spec.responses);
      assert.ok(statuses.some((status) => /^2/.test(status)), `${name}: a success answer`);
      assert.ok(statuses.includes("4XX"), `${name}: its errors (4XX) in the documented shape`);
      for (const [status, answer] of Object.entries(spec.responses)) {
        const json = answer.content?.["application/json"];
        if (json) assert.ok(json.schema, `${name} ${status}: a schema`);
      }
    }
  });

  it("when a platform and a vendor error are documented, then they have the shapes the service answers in", async () => {
    const errorOf = (path: string, method: string) =>
      (document.paths[path]![method] as Operation["spec"]).responses["4XX"]!.content!["application/json"]!.schema as { properties: { error: { required: string[] } } };
    assert.deepEqual(errorOf("/api/v1/balance", "get").properties.error.required, ["code", "message"]);
    assert.deepEqual(errorOf("/api/aimodel/v1beta/models", "get").properties.error.required, ["code", "message", "status"]);
    const platform = await call(service, "GET", "/api/v1/balance");
    assert.deepEqual(Object.keys(platform.json.error).sort(), ["code", "message"]);
    const vendor = await call(service, "GET", "/api/aimodel/v1beta/models");
    assert.deepEqual(Object.keys(vendor.json.error).sort(), ["code", "details", "message", "status"]);
  });

  it("when the commands of the README and docs send a JSON body, then that body is an example in the document", async () => {
    // One example is the media type's `example`, several its `examples` map (as @fastify/swagger writes a schema's `examples`).
    const examples = operationsOf(document).flatMap(({ spec }) => {
      const media = spec.requestBody?.content["application/json"];
      if (!media) return [];
      return [...(media.example === undefined ? [] : [media.example]), ...Object.values(media.examples ?? {}).map((example) => example.value)];
    });
    assert.ok(examples.length > 0, "the document has request examples");
    const bodies = await readmeBodies();
    assert.ok(bodies.length >= 4, `the README's walk-through sends JSON bodies (found ${bodies.length})`);
    for (const body of bodies) {
      assert.ok(examples.some((example) => JSON.stringify(example) === JSON.stringify(body)), `documented body ${JSON.stringify(body)} is an example`);
    }
  });

  it("when /docs is opened, then Swagger UI is served with try-it-out on, reading this same document", async () => {
    const page = await fetch(`${service.url}/docs/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type") ?? "", /text\/html/);
    assert.match(await page.text(), /swagger-ui/i);
    const initializer = await (await fetch(`${service.url}/docs/static/swagger-initializer.js`)).text();
    assert.match(initializer, /"tryItOutEnabled":\s*true/);
    const served = await (await fetch(`${service.url}/docs/json`)).json();
    assert.deepEqual(served, document);
  });

  it("when the document is read again, then it is the same bytes under one ETag, /docs/json too, and If-None-Match with it is answered 304 without a body", async () => {
    const first = await fetch(`${service.url}/openapi.json`);
    const second = await fetch(`${service.url}/docs/json`);
    const etag = first.headers.get("etag");
    assert.match(etag ?? "", /^"[\w-]+"$/);
    assert.equal(second.headers.get("etag"), etag);
    assert.deepEqual(Buffer.from(await second.arrayBuffer()), Buffer.from(await first.arrayBuffer()));
    const revalidated = await fetch(`${service.url}/openapi.json`, { headers: { "if-none-match": `W/"other", ${etag}` } });
    assert.equal(revalidated.status, 304);
    assert.equal(revalidated.headers.get("etag"), etag);
    assert.equal(await revalidated.text(), "");
  });

  it("when a Swagger UI file is fetched, then it is served with its type under a strong ETag (read once, not per request), If-None-Match is answered 304, and an unknown file is 404", async () => {
    const bundle = await fetch(`${service.url}/docs/static/swagger-ui-bundle.js`);
    assert.equal(bundle.status, 200);
    assert.match(bundle.headers.get("content-type") ?? "", /^application\/javascript/);
    const etag = bundle.headers.get("etag");
    // @fastify/static's tags are weak (W/"size-mtime"): a strong content hash is the copy read at start.
    assert.match(etag ?? "", /^"[\w-]{43}"$/);
    assert.match(await bundle.text(), /SwaggerUIBundle/);
    const revalidated = await fetch(`${service.url}/docs/static/swagger-ui-bundle.js`, { headers: { "if-none-match": etag! } });
    assert.equal(revalidated.status, 304);
    const css = await fetch(`${service.url}/docs/static/swagger-ui.css`);
    assert.match(css.headers.get("content-type") ?? "", /^text\/css/);
    assert.notEqual(css.headers.get("etag"), etag);
    assert.equal((await fetch(`${service.url}/docs/static/no-such-file.js`)).status, 404);
  });

  it("when a field is documented in its proto, then the document describes it in the proto's words", () => {
    type Described = { properties: Record<string, { description?: string }> };
    const post = document.paths["/api/v1/generations"]!.post as { requestBody: { content: Record<string, { schema: Described }> } };
    const body = post.requestBody.content["application/json"]!.schema;
    assert.ok(FIELD_DOCS["generation.v1.CreateGenerationRequest.timeout"]);
    assert.equal(body.properties.timeout!.description, FIELD_DOCS["generation.v1.CreateGenerationRequest.timeout"]);
    assert.equal(body.properties.prompt!.description, FIELD_DOCS["generation.v1.CreateGenerationRequest.prompt"]);
  });

  it("when money is sent as a JSON number, then the schema refuses it (422 validation_failed) and no money moves", async () => {
    const customer = await createCustomer(service, "1.00");
    const response = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/credits`, { admin: true, body: { amount: 5 } });
    assert.equal(response.status, 422);
    assert.equal(response.json.error.code, "validation_failed");
    assert.equal(response.json.error.message, 'amount must be a decimal string (money, e.g. "10.00"), never a JSON number');
    const balance = await call(service, "GET", `/admin/v1/accounts/${customer.accountId}/balance`, { admin: true });
    assert.equal(balance.json.balance, "1.00");
  });

  it("when a body field has the wrong type, then 422 validation_failed names the field first, in the domain's words (no JSON Schema paths, no null offered)", async () => {
    const customer = await createCustomer(service, "1.00");
    const cases: [string, unknown, string][] = [
      ["/api/v1/generations", { model: "aimodel-3-pro-image", prompt: 5 }, "prompt must be a string"],
      ["/api/v1/generations", { model: "aimodel-3-pro-image", prompt: "x", input_images_urls: "http://x" }, "input_images_urls must be an array"],
      ["/api/v1/generations", { model: "aimodel-3-pro-image", prompt: "x", metadata: [1] }, "metadata must be a JSON object"],
      ["/api/v1/generations", [1, 2], "the request body must be a JSON object"],
    ];
    for (const [path, body, message] of cases) {
      const response = await call(service, "POST", path, { key: customer.apiKey, body });
      assert.equal(response.status, 422, JSON.stringify(body));
      assert.deepEqual(response.json.error, { code: "validation_failed", message });
    }
    const paused = await call(service, "PUT", "/admin/v1/pause", { admin: true, body: { paused: "yes" } });
    assert.deepEqual(paused.json.error, { code: "validation_failed", message: "paused must be true or false" });
    const keys = await call(service, "POST", `/admin/v1/accounts/${customer.accountId}/keys`, { admin: true, body: {} });
    assert.deepEqual(keys.json.error, { code: "validation_failed", message: "models is required" });
    assert.equal((await call(service, "GET", "/api/v1/balance", { key: customer.apiKey })).json.balance, "1.00");
  });
});
