import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  GenerateContentRequestSchema, GenerateContentResponseSchema, type GenerateContentRequest, type GenerateContentResponse, type TextModel,
} from "../../../../gen/generation/v1/text_service_pb.js";
import type { CoreClients } from "../../../core/index.js";
import { idempotencyKeyOf, platformCall } from "../call-options.js";
import type { BodyGuard } from "../edge/body-guard.js";
import { openAiErrorBody, replyWithError, routeNotFound, sendError, toHttpError, withOpenAiParam } from "../error-replies.js";
import { parseBody } from "../json-mapping.js";
import { chatToVendor } from "../openai/chat-request.js";
import { ChatChunks, chatCompletion, type VendorAnswer } from "../openai/chat-response.js";
import { imagesToJobs } from "../openai/images-request.js";
import { makeImages, refuseImageModel } from "../openai/images.js";
import { OPENAI_SCHEMAS } from "../schemas/openai.js";
import { SseAnswer } from "../sse.js";
import { VENDOR_PREFIX } from "./vendor-routes.js";

/** Where the vendor serves OpenAI's API beside its own, and so this service: clients set it as their base URL. */
export const OPENAI_PREFIX = `${VENDOR_PREFIX}/openai`;

/** Who the models list says owns a model. */
const OWNER = "generation-service";

const vendorAnswer = (response: GenerateContentResponse) => toJson(GenerateContentResponseSchema, response) as VendorAnswer;

const modelJson = (model: TextModel) => ({ id: model.baseModelId, object: "model", created: 0, owned_by: OWNER });

/** OpenAI's event: `data: <json>` and a blank line; the stream ends with `data: [DONE]`. */
const sseEvent = (data: string) => `data: ${data}\n\n`;

/** OpenAI's chat completions and models, translated onto TextService: the key is the platform's, as `Authorization: Bearer`. */
export function openAiRoutes(core: CoreClients, guard: BodyGuard) {
  return async (app: FastifyInstance) => {
    // The key is checked, and the announced size, before the body is read; inline images make it as large as the vendor's.
    const chat = guard({ credential: "api_key", keyFrom: "platform", images: true });
    // An image generation carries a prompt, never input images: MAX_BODY_BYTES.
    const images = guard({ credential: "api_key", keyFrom: "platform", images: false });
    app.setErrorHandler(replyWithError);
    app.setNotFoundHandler((request, reply) => sendError(reply, toHttpError(routeNotFound(request))));

    app.get("/models", { schema: OPENAI_SCHEMAS.listModels }, async (request, reply) => {
      const data = [];
      let pageToken = "";
      do {
        const page = await core.text.listTextModels({ pageSize: 1000, pageToken }, platformCall(request, reply));
        data.push(...page.models.map(modelJson));
        pageToken = page.nextPageToken;
      } while (pageToken);
      return { object: "list", data };
    });

    app.get<{ Params: { model: string } }>("/models/:model", { schema: OPENAI_SCHEMAS.getModel }, async (request, reply) => {
      const { model } = await core.text.getTextModel({ name: request.params.model }, platformCall(request, reply));
      return modelJson(model!);
    });

    app.post("/chat/completions", { ...chat, schema: OPENAI_SCHEMAS.chatCompletions }, async (request, reply) => {
      const call = chatToVendor(request.body);
      const message = parseBody(GenerateContentRequestSchema, call.vendorRequest);
      message.model = call.model;
      await refuseImageModel(core, call.model, platformCall(request, reply));
      try {
        if (call.stream) return await streamChat(core, message, call.includeUsage, request, reply);
        const response = await core.text.generateContent(message, platformCall(request, reply));
        return reply.type("application/json; charset=utf-8").send(chatCompletion(vendorAnswer(response), call.model));
      } catch (error) {
        throw withOpenAiParam(error, call.params);
      }
    });

    app.post("/images/generations", { ...images, schema: OPENAI_SCHEMAS.imageGenerations }, async (request, reply) =>
      makeImages(core, imagesToJobs(request.body), () => platformCall(request, reply), idempotencyKeyOf(request)),
    );
  };
}

/**
 * Errors before the first chunk are ordinary HTTP errors; after it, one
 * final `data: {"error": …}` event (what OpenAI's SDKs raise), then the
 * stream closes. A client that hangs up aborts the call through its signal.
 */
async function streamChat(core: CoreClients, message: GenerateContentRequest, includeUsage: boolean, request: FastifyRequest, reply: FastifyReply) {
  const stream = core.text.streamGenerateContent({ request: message }, platformCall(request, reply))[Symbol.asyncIterator]();
  const first = await stream.next();
  const chunks = new ChatChunks(message.model, includeUsage);
  const sse = new SseAnswer(reply, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  try {
    for (let next = first; !next.done && sse.open; next = await stream.next()) {
      for (const chunk of chunks.next(vendorAnswer(next.value.chunk!))) await sse.write(sseEvent(JSON.stringify(chunk)));
    }
    for (const chunk of chunks.end()) await sse.write(sseEvent(JSON.stringify(chunk)));
    await sse.write(sseEvent("[DONE]"));
  } catch (error) {
    await sse.write(sseEvent(JSON.stringify(openAiErrorBody(toHttpError(error)).body)));
  } finally {
    await stream.return?.();
    sse.end();
  }
}
