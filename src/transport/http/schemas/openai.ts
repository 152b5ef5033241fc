import { operation, PLATFORM_SECURITY } from "./common.js";

/**
 * Schemas of OpenAI's chat completions and models API under
 * /api/aimodel/v1beta/openai. The request schema documents the parameters
 * and their types; what they may hold is the translation's to say
 * (openai/chat-request.ts), with 400 naming the parameter.
 */

/** OpenAI's error body, with this service's snake_case reason as `code`. */
export const OPENAI_ERROR = {
  type: "object",
  description: "Every error of /api/aimodel/v1beta/openai: OpenAI's shape; `code` is this service's stable snake_case reason.",
  properties: {
    error: {
      type: "object",
      properties: {
        message: { type: "string" },
        type: { type: "string", description: "invalid_request_error, authentication_error, insufficient_quota, permission_error, …" },
        param: { type: ["string", "null"], description: "The parameter at fault, when known." },
        code: { type: ["string", "null"] },
      },
      required: ["message", "type", "param", "code"],
    },
  },
  required: ["error"],
  examples: [
    { error: { message: "only n = 1 is supported", type: "invalid_request_error", param: "n", code: "unsupported_parameter" } },
  ],
} as const;

const OPENAI_ERRORS = { "4xx": OPENAI_ERROR, "5xx": OPENAI_ERROR } as const;

const openai = (operationId: string, summary: string, parts: { response: object; [part: string]: unknown }) =>
  operation("OpenAI-compatible", operationId, summary, PLATFORM_SECURITY, parts, OPENAI_ERRORS);

const nullable = (type: string | string[], extra: object = {}) => ({ type: [...([] as string[]).concat(type), "null"], ...extra });

const CONTENT = {
  description:
    "A string, or a list of parts: text `{\"type\": \"text\", \"text\"}` and, in user messages, an image as a data URI " +
    "or an http(s) link the service fetches under the input images' rules `{\"type\": \"image_url\", \"image_url\": {\"url\"}}`.",
  type: ["string", "array", "null"],
} as const;

const TOOL_CALL = {
  type: "object",
  properties: {
    id: { type: "string" },
    type: { type: "string", enum: ["function"] },
    function: {
      type: "object",
      properties: { name: { type: "string" }, arguments: { type: "string", description: "The arguments as a JSON object, as a string." } },
      required: ["name", "arguments"],
    },
    extra_content: {
      type: "object",
      description: "The upstream's reasoning signature of the call, to be sent back with it (as the vendor's own OpenAI API does).",
      properties: { google: { type: "object", properties: { thought_signature: { type: "string" } }, required: ["thought_signature"] } },
    },
  },
  required: ["id", "type", "function"],
} as const;

const MESSAGE = {
  type: "object",
  properties: {
    role: { type: "string", enum: ["system", "developer", "user", "assistant", "tool"] },
    content: CONTENT,
    name: { type: "string" },
    tool_calls: { type: "array", items: TOOL_CALL },
    tool_call_id: { type: "string" },
  },
  required: ["role"],
} as const;

const HAIKU = { model: "aimodel-3.5-flash", messages: [{ role: "user", content: "Write a haiku about tides" }] };

const CHAT_BODY = {
  type: "object",
  properties: {
    model: { type: "string", description: 'A text model id, e.g. "aimodel-3.5-flash".' },
    messages: { type: "array", items: MESSAGE, minItems: 1 },
    stream: nullable("boolean"),
    stream_options: nullable("object", { properties: { include_usage: { type: "boolean" } } }),
    n: nullable("integer", { description: "Only 1." }),
    max_tokens: nullable("integer"),
    max_completion_tokens: nullable("integer", { description: "The answer's output allowance, reserved; the model's maximum when unset." }),
    temperature: nullable("number"),
    top_p: nullable("number"),
    stop: { type: ["string", "array", "null"], items: { type: "string" } },
    seed: nullable("integer"),
    presence_penalty: nullable("number"),
    frequency_penalty: nullable("number"),
    response_format: nullable("object", {
      description: '`{"type": "json_object"}` or `{"type": "json_schema", "json_schema": {"name", "schema"}}`: a JSON answer.',
      properties: { type: { type: "string", enum: ["text", "json_object", "json_schema"] }, json_schema: { type: "object" } },
    }),
    reasoning_effort: nullable("string", {
      enum: ["none", "minimal", "low", "medium", "high", null], description: "Mapped to the vendor's thinkingConfig.",
    }),
    tools: nullable("array", {
      items: {
        type: "object",
        properties: {
          type: { type: "string", enum: ["function"] },
          function: {
            type: "object",
            properties: { name: { type: "string" }, description: { type: "string" }, parameters: { type: "object" } },
            required: ["name"],
          },
        },
        required: ["type", "function"],
      },
    }),
    tool_choice: { description: '"none", "auto", "required" or {"type": "function", "function": {"name"}}.', type: ["string", "object", "null"] },
    user: nullable("string", { description: "Accepted and ignored." }),
  },
  required: ["model", "messages"],
  examples: [HAIKU, { ...HAIKU, stream: true, stream_options: { include_usage: true } }],
} as const;

const USAGE = {
  type: "object",
  properties: {
    prompt_tokens: { type: "integer" },
    completion_tokens: { type: "integer", description: "Output tokens, thinking included: what is charged at the output price." },
    total_tokens: { type: "integer" },
    completion_tokens_details: { type: "object", properties: { reasoning_tokens: { type: "integer" } }, required: ["reasoning_tokens"] },
  },
  required: ["prompt_tokens", "completion_tokens", "total_tokens", "completion_tokens_details"],
} as const;

const FINISH_REASON = { type: "string", enum: ["stop", "length", "content_filter", "tool_calls"] } as const;

const CHAT_COMPLETION = {
  type: "object",
  properties: {
    id: { type: "string" },
    object: { type: "string", enum: ["chat.completion"] },
    created: { type: "integer" },
    model: { type: "string" },
    choices: {
      type: "array",
      items: {
        type: "object",
        properties: {
          index: { type: "integer" },
          message: {
            type: "object",
            properties: {
              role: { type: "string", enum: ["assistant"] },
              content: { type: ["string", "null"] },
              refusal: { type: "null" },
              tool_calls: { type: "array", items: TOOL_CALL },
            },
            required: ["role", "content", "refusal"],
          },
          logprobs: { type: "null" },
          finish_reason: FINISH_REASON,
        },
        required: ["index", "message", "logprobs", "finish_reason"],
      },
    },
    usage: USAGE,
  },
  required: ["id", "object", "created", "model", "choices", "usage"],
} as const;

const MODEL = {
  type: "object",
  properties: {
    id: { type: "string" },
    object: { type: "string", enum: ["model"] },
    created: { type: "integer", description: "0: the catalog keeps no creation time." },
    owned_by: { type: "string" },
  },
  required: ["id", "object", "created", "owned_by"],
} as const;

const IMAGES_BODY = {
  type: "object",
  properties: {
    model: { type: "string", description: 'An image model id, e.g. "aimodel-3-pro-image".' },
    prompt: { type: "string" },
    n: nullable("integer", { description: "Images to make, 1 to 4, each a job charged at the model's per-image price." }),
    size: nullable("string", {
      description: '"auto", WIDTHxHEIGHT (its aspect ratio; 1K, 2K or 4K by the long side) or an aspect ratio such as "16:9".',
    }),
    response_format: nullable("string", { enum: ["url", "b64_json", null], description: "`url` (default): the signed, expiring result link." }),
  },
  required: ["model", "prompt"],
  examples: [{ model: "aimodel-3-pro-image", prompt: "a lighthouse at dusk", size: "1536x1024", response_format: "url" }],
} as const;

const IMAGES = {
  type: "object",
  properties: {
    created: { type: "integer" },
    data: {
      type: "array",
      items: { type: "object", properties: { url: { type: "string" }, b64_json: { type: "string" } } },
    },
  },
  required: ["created", "data"],
} as const;

export const OPENAI_SCHEMAS = {
  chatCompletions: openai("createChatCompletion", "Chat completion (OpenAI's API), one answer or a stream", {
    description:
      "Translated onto generateContent: the same reservation, settlement and statement entries. With `stream: true`, Server-Sent Events of " +
      "`chat.completion.chunk`, ending with `data: [DONE]`; an error after the first chunk arrives as a final `data: {\"error\": …}` event.",
    body: CHAT_BODY,
    response: {
      200: {
        description: "The completion, or its chunks.",
        content: {
          "application/json": { schema: CHAT_COMPLETION },
          // One event (OpenAPI 3.1 has no itemSchema: the schema describes each event of the stream, as Schemathesis reads it).
          "text/event-stream": {
            schema: {
              type: "object",
              description: "One event: `data: <chat.completion.chunk JSON>`, repeated; the last is `data: [DONE]`.",
              properties: { data: { type: "string" } },
              required: ["data"],
            },
          },
        },
      },
    },
  }),
  imageGenerations: openai("createImage", "Generate images (OpenAI's API): one job per image, charged per image", {
    description:
      "Each image is a job of the jobs API (reserved and charged at the model's per-image price, in the statement); the answer waits for them.",
    body: IMAGES_BODY,
    response: { 200: IMAGES },
  }),
  listModels: openai("listOpenAiModels", "The text models (OpenAI's list shape)", {
    response: {
      200: {
        type: "object",
        properties: { object: { type: "string", enum: ["list"] }, data: { type: "array", items: MODEL } },
        required: ["object", "data"],
      },
    },
  }),
  getModel: openai("getOpenAiModel", "One text model (OpenAI's shape)", {
    params: { type: "object", properties: { model: { type: "string", examples: ["aimodel-3.5-flash"] } }, required: ["model"] },
    response: { 200: MODEL },
  }),
} as const;
