import { CreateVideoInteractionRequestSchema } from "../../../../gen/generation/v1/generation_service_pb.js";
import {
  CountTokensRequestSchema, CountTokensResponseSchema, GenerateContentRequestSchema, GenerateContentResponseSchema, TextModelSchema,
} from "../../../../gen/generation/v1/text_service_pb.js";
import { IDEMPOTENCY_HEADERS, operation, VENDOR_ERRORS, VENDOR_SECURITY } from "./common.js";
import { ACCEPTED } from "./jobs.js";
import { protoJsonSchema } from "./proto-json-schema.js";

/**
 * Schemas of the vendor's wire format under /api/aimodel/v1beta (and /v1):
 * the proto3 JSON mapping of text_service.proto, lowerCamelCase as the
 * vendor's SDKs send it, generated from the same descriptors as the RPCs.
 */

const vendor = (operationId: string, summary: string, parts: { response: object; [part: string]: unknown }) =>
  operation("vendor wire format", operationId, summary, VENDOR_SECURITY, parts, VENDOR_ERRORS);

/** Where the key may travel besides a header. */
const KEY_QUERY = { key: { type: "string", description: "The API key, when no header carries it." } } as const;

const MODEL_PARAMS = {
  type: "object",
  properties: { model: { type: "string", description: 'A text model id, e.g. "aimodel-3.5-flash".', examples: ["aimodel-3.5-flash"] } },
  required: ["model"],
} as const;

/** The vendor's Model resource: every field present. */
const TEXT_MODEL = {
  ...protoJsonSchema(TextModelSchema, { direction: "output" }),
  required: ["name", "baseModelId", "version", "displayName", "description", "inputTokenLimit", "outputTokenLimit", "supportedGenerationMethods"],
};

const HAIKU = { contents: [{ role: "user", parts: [{ text: "Write a haiku about tides" }] }] };

const GENERATE_BODY = {
  ...protoJsonSchema(GenerateContentRequestSchema, { direction: "input", omit: ["model"] }),
  examples: [HAIKU, { ...HAIKU, generationConfig: { maxOutputTokens: 256, temperature: 0.7 } }],
};
const GENERATE_RESPONSE = protoJsonSchema(GenerateContentResponseSchema, { direction: "output" });

/** Query of the generating routes: the key, and `alt=sse` for a stream of Server-Sent Events. */
const GENERATE_QUERY = {
  type: "object",
  properties: { ...KEY_QUERY, alt: { type: "string", description: "`sse` for Server-Sent Events; anything else answers one JSON array." } },
} as const;

export const VENDOR_SCHEMAS = {
  listModels: vendor("listTextModels", "The text and image models, paged", {
    querystring: {
      type: "object",
      // pageSize travels as an int32: larger is no page size at all (the vendor caps any size at 1000 anyway).
      properties: { ...KEY_QUERY, pageSize: { type: "integer", maximum: 2 ** 31 - 1 }, pageToken: { type: "string" } },
    },
    response: {
      200: {
        type: "object",
        properties: { models: { type: "array", items: TEXT_MODEL }, nextPageToken: { type: "string" } },
        required: ["models"],
      },
    },
  }),
  getModel: vendor("getTextModel", "One text or image model", {
    params: MODEL_PARAMS,
    querystring: { type: "object", properties: KEY_QUERY },
    response: { 200: TEXT_MODEL },
  }),
  generateContent: vendor("generateContent", "Generate text, or an image on an image model, in one answer", {
    description:
      "Money is held for the call (input × prompt tokens + output × the output bound) and settled on the actual usage. " +
      "On an image model the answer's `inlineData` part is the image, held and charged at the model's per-image price " +
      "for `generationConfig.imageConfig.imageSize` (1K by default).",
    params: MODEL_PARAMS,
    querystring: { type: "object", properties: KEY_QUERY },
    body: GENERATE_BODY,
    response: { 200: GENERATE_RESPONSE },
  }),
  streamGenerateContent: vendor("streamGenerateContent", "Generate text (or an image) as a stream", {
    description:
      "With `alt=sse`: Server-Sent Events, one `data: <GenerateContentResponse>` event per chunk; the last chunk carries the usage that is charged. " +
      "An image model sends its whole answer (the image, charged its per-image price) as one chunk. " +
      "An error after the first chunk arrives as a final `data: {\"error\": …}` event. Without `alt=sse`: one JSON array of the chunks.",
    params: MODEL_PARAMS,
    querystring: GENERATE_QUERY,
    body: GENERATE_BODY,
    response: {
      200: {
        description: "The chunks.",
        content: {
          "application/json": { schema: { type: "array", items: GENERATE_RESPONSE } },
          "text/event-stream": { schema: { type: "string", description: "data: <GenerateContentResponse JSON>\\r\\n\\r\\n, repeated" } },
        },
      },
    },
  }),
  countTokens: vendor("countTokens", "Count a request's prompt tokens (free)", {
    params: MODEL_PARAMS,
    querystring: { type: "object", properties: KEY_QUERY },
    body: { ...protoJsonSchema(CountTokensRequestSchema, { direction: "input", omit: ["model"] }), examples: [HAIKU] },
    response: { 200: protoJsonSchema(CountTokensResponseSchema, { direction: "output" }) },
  }),
  createVideoInteraction: vendor("createVideoInteraction", "Create a video job (poll it at /api/v1/jobs/{id} with the Bearer key)", {
    headers: IDEMPOTENCY_HEADERS,
    querystring: { type: "object", properties: KEY_QUERY },
    body: {
      ...protoJsonSchema(CreateVideoInteractionRequestSchema, { direction: "input", omit: ["idempotency_key"] }),
      examples: [{ model: "videomodel-3.1-generate-001", instances: [{ prompt: "waves at sunrise" }], parameters: { durationSeconds: 4 } }],
    },
    response: { 202: ACCEPTED },
  }),
} as const;
