import type { FastifyInstance } from "fastify";
import { Readable } from "node:stream";
import type { CoreClients } from "../../../core/index.js";
import { requestCall } from "../call-options.js";
import { GatewayError } from "../gateway-error.js";
import { PLATFORM_ERRORS } from "../schemas/common.js";

const BINARY = { schema: { type: "string", contentMediaType: "application/octet-stream" } } as const;

const FILE_SCHEMA = {
  tags: ["files"],
  operationId: "readFile",
  summary: "A job's result (image or video) behind its signed link",
  description: "The link is the job's `result.image_url`: it expires (RESULT_URL_TTL) and its signature covers the key and the expiry. No API key is needed.",
  security: [],
  params: { type: "object", properties: { "*": { type: "string" } } },
  querystring: {
    type: "object",
    properties: {
      expires: { type: "string", description: "Unix time after which the link no longer works." },
      signature: { type: "string", description: "The link's signature (hex)." },
    },
  },
  response: {
    200: { description: "The file.", content: { "image/png": BINARY, "image/jpeg": BINARY, "image/webp": BINARY, "video/mp4": BINARY } },
    ...PLATFORM_ERRORS,
  },
} as const;

/** Signed result URLs: GET /files/<key>?expires=<unix>&signature=<hex>. */
export function fileRoutes(core: CoreClients) {
  return async (app: FastifyInstance) => {
    app.get<{ Params: { "*": string }; Querystring: { expires?: string; signature?: string } }>("/files/*", { schema: FILE_SCHEMA }, async (request, reply) => {
      const { expires, signature } = request.query;
      if (!expires || !/^\d{1,12}$/.test(expires) || !signature) {
        throw new GatewayError(403, "link_bad_signature", "the link is missing its expiry or signature");
      }
      const stream = core.files
        .readFile({ key: request.params["*"], expires: BigInt(expires), signature }, requestCall(reply))
        [Symbol.asyncIterator]();
      const first = await stream.next();
      if (first.done) throw new GatewayError(404, "file_not_found", "no such file");
      reply.header("content-type", first.value.contentType);
      reply.header("content-length", String(first.value.size));
      reply.header("cache-control", "private, max-age=300");
      async function* body() {
        if (first.value && first.value.data.length > 0) yield first.value.data;
        for (let next = await stream.next(); !next.done; next = await stream.next()) yield next.value.data;
      }
      return reply.send(Readable.from(body()));
    });
  };
}
