import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, extname, join } from "node:path";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from "fastify";
import { VENDOR_PREFIXES } from "./routes/vendor-routes.js";
import { SECURITY_SCHEMES } from "./schemas/common.js";

/** The document's version: the API's, not the package's. */
const API_VERSION = "1.0.0";

const DESCRIPTION = `One API key and one prepaid balance for image, text and video generation.

- **/api/v1**: the jobs API. Create a job (202, money reserved), poll it until \`done\` or \`failed\` (or receive the signed webhook), download the result from its signed link.
- **/api/aimodel/v1beta**: the vendor's wire format (JSON and Server-Sent Events), so the vendor's SDKs work unchanged; the same routes answer under **/api/aimodel/v1**.
- **/api/aimodel/v1beta/openai**: OpenAI's chat completions, image generation and models API (Authorization: Bearer <API_KEY>), so OpenAI's SDKs work with this base URL.
- **/admin/v1**: the operator's API (accounts, credits, keys, prices, pauses), with ADMIN_TOKEN.
- The same operations are gRPC, Connect and gRPC-Web RPCs (proto/generation/v1); the core port serves gRPC reflection.

Money is always a decimal string in US dollars, never a JSON number. Errors are \`{"error": {"code", "message"}}\` everywhere except /api/aimodel, which answers in the vendor's error shape (OpenAI's under /api/aimodel/v1beta/openai).`;

const TAGS = [
  { name: "jobs", description: "Asynchronous jobs, the balance and the model catalog (Authorization: Bearer <API_KEY>)." },
  { name: "deprecated aliases", description: "Older routes whose prefix fixes the model; answered with Deprecation: true." },
  { name: "vendor wire format", description: "The vendor's generateContent API (x-vendor-api-key, x-goog-api-key or ?key=). Also under /api/aimodel/v1." },
  { name: "OpenAI-compatible", description: "OpenAI's chat completions, image generation and models API on the same key and balance (Authorization: Bearer <API_KEY>)." },
  { name: "admin", description: "The operator's API (Authorization: Bearer <ADMIN_TOKEN>)." },
  { name: "files", description: "Results behind signed, expiring links." },
  { name: "health", description: "Probes for load balancers and orchestrators." },
];

/** Routes answered but not listed: the vendor surface's other prefixes (the same operations as its first). */
const [, ...UNLISTED] = VENDOR_PREFIXES;

/**
 * Routes that take no body: their body schema (which requireSchemas asks of
 * every POST) only documents that; the document leaves the request body out,
 * so no client is told to send one.
 */
const WITHOUT_BODY = new Set(["POST /panel/session"]);

/**
 * Routes that need no JSON schema: the document and its page, the RPC paths (`/package.Service/Method`), whose
 * bodies are protobuf messages described by proto/, and the web panel's files (pages and assets, no API).
 */
const SCHEMALESS = [/^\/openapi\.json$/, /^\/docs(\/|$)/, /^\/[a-z_][\w]*(\.[a-z_][\w]*)*\.[A-Z]\w*\/[A-Z]\w*$/, /^\/panel\/(\*)?$/];

/**
 * Every route declares its answers (and, where it reads one, its body):
 * a route added without them stops the gateway from starting, in every test.
 */
function requireSchemas(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    if (SCHEMALESS.some((pattern) => pattern.test(route.url))) return;
    const schema = route.schema;
    if (!schema?.response) throw new Error(`route ${route.method} ${route.url} declares no response schema`);
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const readsBody = methods.some((method) => method === "POST" || method === "PUT");
    if (readsBody && !schema.body && !schema.hide) throw new Error(`route ${route.method} ${route.url} declares no body schema`);
    // hideUntagged leaves a route without tags out of the document: only on purpose (hide), never by omission.
    if (!schema.hide && !schema.tags) throw new Error(`route ${route.method} ${route.url} has no tags (or hide: true): it would be missing from the document`);
  });
}

/** A document built once: its bytes, their type and ETag, the same for every request. */
interface FixedDocument {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
  readonly cacheControl: string;
}

function fixedDocument(body: Buffer, type: string, cacheControl = "no-cache"): FixedDocument {
  return { body, type, cacheControl, etag: `"${createHash("sha256").update(body).digest("base64url")}"` };
}

const STATIC_TYPES: Record<string, string> = {
  ".js": "application/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".png": "image/png",
  ".svg": "image/svg+xml",
};

let uiFiles: Map<string, FixedDocument> | undefined;

/**
 * Swagger UI's files (the static/ directory @fastify/swagger-ui serves with
 * @fastify/static), read once per process. Empty when the package no longer
 * has that directory: its own route then serves them from disk, as before.
 */
function swaggerUiFiles(): Map<string, FixedDocument> {
  if (uiFiles) return uiFiles;
  uiFiles = new Map();
  try {
    const directory = join(dirname(createRequire(import.meta.url).resolve("@fastify/swagger-ui")), "static");
    for (const name of readdirSync(directory)) {
      const type = STATIC_TYPES[extname(name)];
      if (type) uiFiles.set(name, fixedDocument(readFileSync(join(directory, name)), type, "public, max-age=0"));
    }
  } catch {
    uiFiles.clear();
  }
  return uiFiles;
}

/** Whether an If-None-Match header names this ETag (or is `*`); weak tags compare equal (RFC 9110 §13.1.2). */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(",").some((tag) => {
    const trimmed = tag.trim();
    return trimmed === "*" || trimmed.replace(/^W\//, "") === etag;
  });
}

function sendFixed(request: FastifyRequest, reply: FastifyReply, document: FixedDocument): FastifyReply {
  reply.header("cache-control", document.cacheControl).header("etag", document.etag).type(document.type);
  if (matches(request.headers["if-none-match"], document.etag)) return reply.code(304).send();
  return reply.send(document.body);
}

/**
 * `GET /openapi.json` (OpenAPI 3.1, generated from the routes' own schemas,
 * so it cannot drift from what is validated and serialized) and `GET /docs`
 * (Swagger UI with try-it-out). Registered before the routes, so it sees
 * every one of them. The document is serialized once, when the app is
 * ready, and Swagger UI's files are read once at start: each request gets
 * that one buffer (and its ETag; If-None-Match is answered 304), not a
 * fresh 170 KB string or a file read.
 */
export async function openApi(app: FastifyInstance): Promise<void> {
  requireSchemas(app);
  let document: FixedDocument | undefined;
  const serveDocument = async (request: FastifyRequest, reply: FastifyReply) => sendFixed(request, reply, document!);
  const files = swaggerUiFiles();
  app.addHook("onRoute", (route) => {
    const operationId = route.schema?.operationId;
    const link = operationId === undefined ? undefined : LINKS.find((each) => each.from.test(operationId));
    if (link) route.links = { [link.status]: linksOf(link) };
    // Swagger UI's own copy of the document (/docs/json) is the same bytes, not serialized again per request.
    if (route.url === "/docs/json") route.handler = serveDocument;
    if (route.url === "/docs/static/*") {
      const fromDisk = route.handler;
      route.handler = function (request, reply) {
        const file = files.get((request.params as { "*"?: string })["*"] ?? "");
        return file ? sendFixed(request, reply, file) : fromDisk.call(this, request, reply);
      };
    }
  });
  await app.register(swagger, {
    // Routes without tags are not operations of the API (the RPC paths, the catch-all of malformed vendor model paths).
    hideUntagged: true,
    openapi: {
      openapi: "3.1.0",
      info: { title: "Generation service", version: API_VERSION, description: DESCRIPTION, license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" } },
      // Relative: the document describes the service that serves it, wherever that is.
      servers: [{ url: "/", description: "This service" }],
      tags: TAGS,
      components: { securitySchemes: SECURITY_SCHEMES as never },
    },
    // Called with { openapiObject } for an OpenAPI document (the typings name only the Swagger 2 form).
    transformObject: (document) => requiredHeaders((document as unknown as { openapiObject: OpenApiDocument }).openapiObject) as never,
    transform: ({ schema, url, route }) => {
      const hidden = UNLISTED.some((prefix) => url.startsWith(`${prefix}/`));
      if (WITHOUT_BODY.has(`${String(route.method)} ${url}`)) return { schema: { ...schema, body: undefined } as FastifySchema, url };
      // A wildcard is a file's key: named, so the document has a real path parameter.
      if (url === "/files/*") return { schema: { ...schema, params: FILE_KEY_PARAMS } as FastifySchema, url: "/files/{key}" };
      return { schema: (hidden ? { ...schema, hide: true } : schema) as FastifySchema, url };
    },
  });
  await app.register(swaggerUi, {
    routePrefix: "/docs",
    uiConfig: { tryItOutEnabled: true, persistAuthorization: false, displayOperationId: true, deepLinking: true },
    staticCSP: true,
  });
  // After @fastify/swagger's own onReady hook, which app.swagger() needs to have run.
  app.addHook("onReady", (done) => {
    document = fixedDocument(Buffer.from(JSON.stringify(app.swagger())), "application/json; charset=utf-8");
    done();
  });
  app.get("/openapi.json", { schema: { hide: true } }, serveDocument);
}

const FILE_KEY_PARAMS = {
  type: "object",
  properties: { key: { type: "string", description: "The file's key, as in the signed link." } },
  required: ["key"],
} as const;

interface ResponseHeader {
  required?: boolean;
  schema?: Record<string, unknown>;
}
interface OpenApiDocument {
  paths?: Record<string, Record<string, { responses?: Record<string, { headers?: Record<string, ResponseHeader> }> }>>;
}

/**
 * The operations a created resource's id leads to: (answer field, path parameter, operations that take it). As OpenAPI
 * links (3.1, §4.8.20), a client generator or a stateful tester (Schemathesis) can follow a job from its creation to its
 * result, an account to its credits and keys.
 */
const LINKS: readonly { from: RegExp; status: string; field: string; parameter: string; to: readonly string[] }[] = [
  // Every job-creating answer (202) names a job that GET /api/v1/jobs/{jobId} reads.
  { from: /^(createGeneration|createVideoInteraction|(text|url)Generations_.+)$/, status: "202", field: "job_id", parameter: "jobId", to: ["getJob"] },
  { from: /^createAccount$/, status: "201", field: "account_id", parameter: "accountId", to: ["addCredits", "getAccountBalance", "createApiKey", "setWebhook"] },
  { from: /^createApiKey$/, status: "201", field: "key_id", parameter: "keyId", to: ["revokeApiKey"] },
];

const linksOf = ({ to, parameter, field }: (typeof LINKS)[number]) =>
  Object.fromEntries(to.map((target) => [target, { operationId: target, parameters: { [parameter]: `$response.body#/${field}` } }]));

/**
 * What @fastify/swagger has no place for. A response header the route always sets is marked `"x-required": true`
 * in its schema: here it becomes the header's `required`, so clients and Schemathesis' response_headers_conformance
 * can rely on it.
 */
function requiredHeaders(document: OpenApiDocument): OpenApiDocument {
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      for (const response of Object.values(operation.responses ?? {})) {
        for (const header of Object.values(response.headers ?? {})) {
          if (header.schema?.["x-required"] !== true) continue;
          const { "x-required": _required, ...schema } = header.schema;
          header.schema = schema;
          header.required = true;
        }
      }
    }
  }
  return document;
}
