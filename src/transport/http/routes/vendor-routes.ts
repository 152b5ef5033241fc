import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { CreateVideoInteractionRequestSchema } from "../../../../gen/generation/v1/generation_service_pb.js";
import {
  GenerateContentRequestSchema, GenerateContentResponseSchema, type GenerateContentResponse,
} from "../../../../gen/generation/v1/text_service_pb.js";
import type { CoreClients } from "../../../runtime/core-clients.js";
import { idempotencyKeyOf, vendorCall } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { replyWithError, routeNotFound, sendVendorError, toHttpError, vendorErrorBody } from "../error-replies.js";
import { GatewayError } from "../gateway-error.js";
import { parseBody } from "../json-mapping.js";
import { acceptedReply } from "./jobs-routes.js";

export const VENDOR_PREFIX = "/api/aimodel/v1beta";
const MODEL_ACTION = /^([^:/]+):(generateContent|streamGenerateContent)$/;

/** One SSE event: `data: <json>` and a blank line; no event names, no [DONE], as the vendor streams. */
const sseEvent = (json: unknown) => `data: ${JSON.stringify(json)}\r\n\r\n`;

const vendorJson = (response: GenerateContentResponse) => toJson(GenerateContentResponseSchema, response);

/** Registered with `prefix: VENDOR_PREFIX`, so its error and not-found handlers cover only the vendor surface. */
export function vendorRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    // The key (header or ?key=) is checked, and the announced size, before the body is read.
    const generation = guard({ credential: "api_key", keyFrom: "vendor", images: true });
    // A video interaction carries a prompt and parameters, never inline images: MAX_BODY_BYTES.
    const interactions = guard({ credential: "api_key", keyFrom: "vendor", images: false });
    app.setErrorHandler(replyWithError);
    app.setNotFoundHandler((request, reply) => sendVendorError(reply, toHttpError(routeNotFound(request))));

    app.post<{ Params: { "*": string } }>("/models/*", generation, async (request, reply) => {
      const match = MODEL_ACTION.exec(decodeURIComponent(request.params["*"]));
      if (!match) throw new GatewayError(404, "not_found", "expected models/{model}:generateContent or :streamGenerateContent");
      const [, model, action] = match;
      const message = parseBody(GenerateContentRequestSchema, request.body);
      message.model = model!;
      if (action === "generateContent") return vendorJson(await core.text.generateContent(message, vendorCall(request, reply)));
      if ((request.query as { alt?: string }).alt !== "sse") return streamAsArray(core, message, request, reply);
      return streamAnswer(core, message, request, reply);
    });

    app.post("/interactions", interactions, async (request, reply) => {
      const message = parseBody(CreateVideoInteractionRequestSchema, request.body);
      message.idempotencyKey = idempotencyKeyOf(request);
      return acceptedReply(reply, await core.generation.createVideoInteraction(message, vendorCall(request, reply)));
    });
  };
}

/** Without `alt=sse` the vendor answers a stream as one JSON array of the chunks; so does this surface. */
async function streamAsArray(
  core: CoreClients,
  message: ReturnType<typeof parseBody<typeof GenerateContentRequestSchema>>,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const chunks: unknown[] = [];
  for await (const response of core.text.streamGenerateContent({ request: message }, vendorCall(request, reply))) {
    chunks.push(vendorJson(response.chunk!));
  }
  return reply.send(chunks);
}

/**
 * Errors before the first chunk are ordinary HTTP errors; after it, one
 * final `data: {"error": …}` event, then the stream closes. A client that
 * hangs up aborts the call (and the upstream) through the call's signal.
 */
async function streamAnswer(
  core: CoreClients,
  message: ReturnType<typeof parseBody<typeof GenerateContentRequestSchema>>,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const stream = core.text.streamGenerateContent({ request: message }, vendorCall(request, reply))[Symbol.asyncIterator]();
  const first = await stream.next();
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  try {
    for (let next = first; !next.done; next = await stream.next()) {
      if (raw.destroyed) break;
      raw.write(sseEvent(vendorJson(next.value.chunk!)));
    }
  } catch (error) {
    if (!raw.destroyed) raw.write(sseEvent(vendorErrorBody(toHttpError(error)).body));
  } finally {
    await stream.return?.();
    raw.end();
  }
}
