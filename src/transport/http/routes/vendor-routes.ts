import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { CreateVideoInteractionRequestSchema } from "../../../../gen/generation/v1/generation_service_pb.js";
import {
  CountTokensRequestSchema, GenerateContentRequestSchema, GenerateContentResponseSchema, TextModelSchema,
  type CountTokensResponse, type GenerateContentRequest, type GenerateContentResponse, type TextModel,
} from "../../../../gen/generation/v1/text_service_pb.js";
import type { CoreClients } from "../../../core/index.js";
import { idempotencyKeyOf, vendorCall, withDelivery } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { SseAnswer } from "../sse.js";
import { replyWithError, routeNotFound, sendError, toHttpError, vendorErrorBody } from "../error-replies.js";
import { GatewayError } from "../gateway-error.js";
import { parseBody } from "../json-mapping.js";
import { VENDOR_ERRORS } from "../schemas/common.js";
import { VENDOR_SCHEMAS } from "../schemas/vendor.js";
import { generateContentResponseJson } from "../vendor-json.js";
import { acceptedReply } from "./jobs-routes.js";

export const VENDOR_PREFIX = "/api/aimodel/v1beta";
/**
 * The same surface under the vendor's stable version too: its SDKs call
 * `{base}/v1beta/…` (JavaScript) or `{base}/v1/…` (Python, since 3.0) by
 * default, so both work when given `{origin}/api/aimodel` as base URL.
 */
export const VENDOR_PREFIXES = [VENDOR_PREFIX, "/api/aimodel/v1"] as const;

/** One SSE event: `data: <json>` and a blank line; no event names, no [DONE], as the vendor streams. */
const sseEvent = (json: string) => `data: ${json}\r\n\r\n`;

const vendorJson = (response: GenerateContentResponse) => toJson(GenerateContentResponseSchema, response);

/** The vendor's Model resource: every field present (an int of 0 would otherwise be left out). */
const modelJson = (model: TextModel | undefined) => toJson(TextModelSchema, model!, { alwaysEmitImplicit: true });

/** The vendor's CountTokensResponse. */
const countJson = (response: CountTokensResponse) => ({
  totalTokens: response.totalTokens,
  promptTokensDetails: response.promptTokensDetails.map(({ modality, tokenCount }) => ({ modality, tokenCount })),
});

/** Registered with each of VENDOR_PREFIXES as `prefix`, so its error and not-found handlers cover only the vendor surface. */
export function vendorRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    // The key (x-vendor-api-key, x-goog-api-key or ?key=) is checked, and the announced size, before the body is read.
    const generation = guard({ credential: "api_key", keyFrom: "vendor", images: true });
    // A video interaction carries a prompt and parameters, never inline images: MAX_BODY_BYTES.
    const interactions = guard({ credential: "api_key", keyFrom: "vendor", images: false });
    app.setErrorHandler(replyWithError);
    app.setNotFoundHandler((request, reply) => sendError(reply, toHttpError(routeNotFound(request))));

    app.get<{ Querystring: { pageSize?: number; pageToken?: string } }>("/models", { schema: VENDOR_SCHEMAS.listModels }, async (request, reply) => {
      const { pageSize = 0, pageToken = "" } = request.query;
      const page = await core.text.listTextModels({ pageSize, pageToken }, vendorCall(request, reply));
      return { models: page.models.map(modelJson), ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
    });

    app.get<{ Params: { model: string } }>("/models/:model", { schema: VENDOR_SCHEMAS.getModel }, async (request, reply) => {
      // `models/{model}:{method}` is a POST: a GET of it is no route (before the key is looked at).
      if (request.params.model.includes(":")) throw routeNotFound(request);
      return modelJson((await core.text.getTextModel({ name: request.params.model }, vendorCall(request, reply))).model);
    });

    type Action = "generateContent" | "streamGenerateContent" | "countTokens";
    const answer = async (model: string, action: Action, request: FastifyRequest, reply: FastifyReply) => {
      if (action === "countTokens") {
        const message = parseBody(CountTokensRequestSchema, request.body);
        message.model = model;
        return countJson(await core.text.countTokens(message, vendorCall(request, reply)));
      }
      const message = parseBody(GenerateContentRequestSchema, request.body);
      message.model = model;
      if (action === "generateContent") {
        const response = await core.text.generateContent(message, vendorCall(request, reply));
        return reply.type("application/json; charset=utf-8").send(generateContentResponseJson(response));
      }
      if ((request.query as { alt?: string }).alt !== "sse") return streamAsArray(core, message, request, reply);
      return streamAnswer(core, message, request, reply);
    };
    // `models/{model}:{action}`, one route per action (the model is what precedes the colon, `%3A` included).
    for (const action of ["generateContent", "streamGenerateContent", "countTokens"] as const) {
      app.post<{ Params: { model: string } }>(`/models/:model(^[^:/]+)::${action}`, { ...generation, schema: VENDOR_SCHEMAS[action] }, (request, reply) =>
        answer(request.params.model, action, request, reply),
      );
    }
    // Any other POST under models/ (an unknown action, a model id with a colon): the routes above took every valid one.
    app.post("/models/*", { ...generation, schema: { hide: true, response: VENDOR_ERRORS } }, async () => {
      throw new GatewayError(404, "not_found", "expected models/{model}:generateContent, :streamGenerateContent or :countTokens");
    });

    app.post("/interactions", { ...interactions, schema: VENDOR_SCHEMAS.createVideoInteraction }, async (request, reply) => {
      const message = parseBody(CreateVideoInteractionRequestSchema, request.body);
      message.idempotencyKey = idempotencyKeyOf(request);
      return acceptedReply(reply, await core.generation.createVideoInteraction(message, vendorCall(request, reply, withDelivery(reply))));
    });
  };
}

/** Without `alt=sse` the vendor answers a stream as one JSON array of the chunks; so does this surface. */
async function streamAsArray(core: CoreClients, message: GenerateContentRequest, request: FastifyRequest, reply: FastifyReply) {
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
async function streamAnswer(core: CoreClients, message: GenerateContentRequest, request: FastifyRequest, reply: FastifyReply) {
  const stream = core.text.streamGenerateContent({ request: message }, vendorCall(request, reply))[Symbol.asyncIterator]();
  const first = await stream.next();
  const sse = new SseAnswer(reply, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  try {
    for (let next = first; !next.done && sse.open; next = await stream.next()) {
      await sse.write(sseEvent(generateContentResponseJson(next.value.chunk!)));
    }
  } catch (error) {
    await sse.write(sseEvent(JSON.stringify(vendorErrorBody(toHttpError(error), request.url).body)));
  } finally {
    await stream.return?.();
    sse.end();
  }
}
