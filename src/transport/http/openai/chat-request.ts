import { GatewayError } from "../gateway-error.js";

/**
 * OpenAI's chat completion request translated into the vendor's
 * generateContent JSON (lowerCamelCase), which then takes the vendor
 * surface's path through TextService: same validation, reservation and
 * settlement. Every refusal here is a 400 naming the parameter, and happens
 * before anything is held.
 */

type Json = Record<string, unknown>;

/** What the route needs besides the vendor request: the model, and how to answer. */
export interface ChatCall {
  readonly model: string;
  readonly vendorRequest: Json;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** Fields of the vendor request that came from an OpenAI parameter of another name: a refusal naming one names the parameter. */
  readonly params: ReadonlyMap<string, string>;
}

/** Parameters OpenAI's API knows that change nothing here (bookkeeping on OpenAI's side): accepted and ignored. */
const IGNORED = new Set(["user", "store", "metadata", "parallel_tool_calls", "service_tier", "prompt_cache_key", "safety_identifier"]);

/** Parameters translated below. */
const TRANSLATED = new Set([
  "model", "messages", "stream", "stream_options", "n", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "seed",
  "presence_penalty", "frequency_penalty", "response_format", "reasoning_effort", "tools", "tool_choice", "logprobs", "top_logprobs",
  "modalities", "logit_bias",
]);

/** OpenAI's own parameters this service cannot honour: refused by name rather than silently dropped. */
const NOT_OFFERED: Readonly<Record<string, string>> = {
  audio: "audio output is not offered",
  prediction: "predicted outputs are not offered",
  web_search_options: "web search is not offered",
  functions: "the deprecated `functions` is not accepted; send `tools`",
  function_call: "the deprecated `function_call` is not accepted; send `tool_choice`",
  verbosity: "verbosity is not offered",
};

/** reasoning_effort → the vendor's thinkingConfig: "none" turns thinking off, the levels are the vendor's thinkingLevel of the same name. */
export const REASONING_EFFORT: Readonly<Record<string, Json>> = {
  none: { thinkingBudget: 0 },
  minimal: { thinkingLevel: "minimal" },
  low: { thinkingLevel: "low" },
  medium: { thinkingLevel: "medium" },
  high: { thinkingLevel: "high" },
};

/** 400 invalid_request_error naming `param`, in OpenAI's terms. */
export const badParam = (param: string, message: string, reason = "invalid_parameter") =>
  new GatewayError(400, reason, message, undefined, param);

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);
/** OpenAI's SDKs send `null` for a parameter they leave unset. */
const isSet = (value: unknown) => value !== undefined && value !== null;

function expect<T>(ok: boolean, value: unknown, param: string, what: string): T {
  if (!ok) throw badParam(param, `${param} must be ${what}`);
  return value as T;
}
const numberOf = (body: Json, name: string) => expect<number>(typeof body[name] === "number", body[name], name, "a number");
const integerOf = (body: Json, name: string) => expect<number>(Number.isInteger(body[name]), body[name], name, "an integer");

/** The chat completion request as the vendor's generateContent JSON; 400 naming the parameter for anything it cannot carry. */
export function chatToVendor(body: unknown): ChatCall {
  if (!isObject(body)) throw badParam("", "the request body must be a JSON object");
  for (const name of Object.keys(body)) {
    if (name in NOT_OFFERED) throw badParam(name, `${name} is not supported: ${NOT_OFFERED[name]}`, "unsupported_parameter");
    if (!TRANSLATED.has(name) && !IGNORED.has(name)) throw badParam(name, `Unrecognized request argument supplied: ${name}`, "unknown_parameter");
  }
  const model = expect<string>(typeof body.model === "string" && body.model !== "", body.model, "model", "a model id");
  if (isSet(body.n) && body.n !== 1) throw badParam("n", "only n = 1 is supported: one choice per request", "unsupported_parameter");
  if (body.logprobs === true || isSet(body.top_logprobs)) throw badParam("logprobs", "logprobs are not offered", "unsupported_parameter");
  if (isSet(body.logit_bias) && !(isObject(body.logit_bias) && Object.keys(body.logit_bias).length === 0)) {
    throw badParam("logit_bias", "logit_bias is not offered", "unsupported_parameter");
  }
  if (isSet(body.modalities) && !(Array.isArray(body.modalities) && body.modalities.every((m) => m === "text"))) {
    throw badParam("modalities", 'only the "text" modality is offered', "unsupported_parameter");
  }
  const stream = isSet(body.stream) ? expect<boolean>(typeof body.stream === "boolean", body.stream, "stream", "true or false") : false;
  const options = isSet(body.stream_options) ? expect<Json>(isObject(body.stream_options), body.stream_options, "stream_options", "an object") : {};
  const params = new Map<string, string>();
  const vendorRequest: Json = { ...messagesToContents(body.messages, params), generationConfig: generationConfig(body) };
  const tools = toolsOf(body.tools);
  if (tools) vendorRequest.tools = tools;
  const toolConfig = toolChoiceOf(body.tool_choice);
  if (toolConfig) vendorRequest.toolConfig = toolConfig;
  return { model: model.replace(/^models\//, ""), vendorRequest, stream, includeUsage: stream && options.include_usage === true, params };
}

function generationConfig(body: Json): Json {
  const config: Json = {};
  const maxTokens = isSet(body.max_completion_tokens) ? "max_completion_tokens" : isSet(body.max_tokens) ? "max_tokens" : undefined;
  if (maxTokens) config.maxOutputTokens = integerOf(body, maxTokens);
  if (isSet(body.temperature)) config.temperature = numberOf(body, "temperature");
  if (isSet(body.top_p)) config.topP = numberOf(body, "top_p");
  if (isSet(body.seed)) config.seed = integerOf(body, "seed");
  if (isSet(body.presence_penalty)) config.presencePenalty = numberOf(body, "presence_penalty");
  if (isSet(body.frequency_penalty)) config.frequencyPenalty = numberOf(body, "frequency_penalty");
  if (isSet(body.stop)) {
    const stop = typeof body.stop === "string" ? [body.stop] : body.stop;
    config.stopSequences = expect(Array.isArray(stop) && stop.every((s) => typeof s === "string"), stop, "stop", "a string or a list of strings");
  }
  if (isSet(body.reasoning_effort)) {
    const thinking = typeof body.reasoning_effort === "string" ? REASONING_EFFORT[body.reasoning_effort] : undefined;
    config.thinkingConfig = expect(thinking !== undefined, thinking, "reasoning_effort", `one of ${Object.keys(REASONING_EFFORT).join(", ")}`);
  }
  if (isSet(body.response_format)) Object.assign(config, responseFormat(body.response_format));
  return config;
}

/** OpenAI's schemas are JSON Schema: they go as the vendor's *JsonSchema fields, not its OpenAPI-subset Schema. */
function responseFormat(format: unknown): Json {
  if (!isObject(format)) throw badParam("response_format", "response_format must be an object");
  switch (format.type) {
    case "text":
      return {};
    case "json_object":
      return { responseMimeType: "application/json" };
    case "json_schema": {
      const schema = (format.json_schema as Json | undefined)?.schema;
      if (!isObject(schema)) throw badParam("response_format.json_schema.schema", "response_format.json_schema.schema must be a JSON Schema object");
      return { responseMimeType: "application/json", responseJsonSchema: schema };
    }
    default:
      throw badParam("response_format.type", 'response_format.type must be "text", "json_object" or "json_schema"');
  }
}

function toolsOf(tools: unknown): Json[] | undefined {
  if (!isSet(tools)) return undefined;
  if (!Array.isArray(tools)) throw badParam("tools", "tools must be a list");
  if (tools.length === 0) return undefined;
  const declarations = tools.map((tool, i) => {
    const fn = isObject(tool) && tool.type === "function" ? tool.function : undefined;
    if (!isObject(fn) || typeof fn.name !== "string") {
      throw badParam(`tools[${i}]`, `tools[${i}] must be {"type": "function", "function": {"name", …}}: only function tools are offered`);
    }
    const declaration: Json = { name: fn.name };
    if (typeof fn.description === "string") declaration.description = fn.description;
    if (isObject(fn.parameters)) declaration.parametersJsonSchema = fn.parameters;
    return declaration;
  });
  return [{ functionDeclarations: declarations }];
}

function toolChoiceOf(choice: unknown): Json | undefined {
  if (!isSet(choice)) return undefined;
  const modes: Record<string, string> = { none: "NONE", auto: "AUTO", required: "ANY" };
  if (typeof choice === "string" && modes[choice]) return { functionCallingConfig: { mode: modes[choice] } };
  const name = isObject(choice) && choice.type === "function" ? (choice.function as Json | undefined)?.name : undefined;
  if (typeof name !== "string") {
    throw badParam("tool_choice", 'tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name"}}');
  }
  return { functionCallingConfig: { mode: "ANY", allowedFunctionNames: [name] } };
}

/**
 * The messages as the vendor's systemInstruction and contents; the tools' answers of one turn travel as one content.
 * `params` learns which OpenAI parameter each image link's fileData came from.
 */
function messagesToContents(messages: unknown, params: Map<string, string>): { systemInstruction?: Json; contents: Json[] } {
  if (!Array.isArray(messages) || messages.length === 0) throw badParam("messages", "messages must be a non-empty list");
  const system: Json[] = [];
  const contents: Json[] = [];
  /** tool_call_id → function name, from the assistant messages so far (a functionResponse names its function). */
  const callNames = new Map<string, string>();
  messages.forEach((message, i) => {
    const param = `messages[${i}]`;
    if (!isObject(message)) throw badParam(param, `${param} must be an object`);
    switch (message.role) {
      case "system":
      case "developer":
        system.push(...textParts(message.content, `${param}.content`));
        return;
      case "user": {
        const parts = userParts(message.content, `${param}.content`);
        parts.forEach((part, j) => {
          if ("fileData" in part) params.set(`contents[${contents.length}].parts[${j}].fileData.fileUri`, `${param}.content[${j}].image_url.url`);
        });
        contents.push({ role: "user", parts });
        return;
      }
      case "assistant": {
        // An empty text beside tool calls is no part (SDKs send "" or null there).
        const parts = isSet(message.content) ? textParts(message.content, `${param}.content`).filter((part) => part.text !== "") : [];
        parts.push(...toolCallParts(message.tool_calls, `${param}.tool_calls`, callNames));
        if (parts.length === 0) throw badParam(`${param}.content`, `${param} has neither content nor tool_calls`);
        contents.push({ role: "model", parts });
        return;
      }
      case "tool": {
        const id = message.tool_call_id;
        const name = typeof id === "string" ? callNames.get(id) : undefined;
        if (name === undefined) throw badParam(`${param}.tool_call_id`, `${param}.tool_call_id names no tool call of an earlier assistant message`);
        const part = { functionResponse: { id, name, response: toolResponse(textParts(message.content, `${param}.content`)) } };
        const last = contents.at(-1);
        if (last?.role === "user" && (last.parts as Json[]).every((p) => "functionResponse" in p)) (last.parts as Json[]).push(part);
        else contents.push({ role: "user", parts: [part] });
        return;
      }
      default:
        throw badParam(`${param}.role`, `${param}.role must be "system", "developer", "user", "assistant" or "tool"`);
    }
  });
  return { ...(system.length > 0 ? { systemInstruction: { parts: system } } : {}), contents };
}

/** A tool's answer as the vendor's functionResponse.response (an object): a JSON object as it is, any other text as `{"output": text}`. */
function toolResponse(parts: Json[]): Json {
  const text = parts.map((part) => part.text as string).join("");
  try {
    const parsed: unknown = JSON.parse(text);
    if (isObject(parsed)) return parsed;
  } catch {
    // Not JSON: the text itself is the output.
  }
  return { output: text };
}

function toolCallParts(calls: unknown, param: string, callNames: Map<string, string>): Json[] {
  if (!isSet(calls)) return [];
  if (!Array.isArray(calls)) throw badParam(param, `${param} must be a list`);
  return calls.map((call, j) => {
    const fn = isObject(call) ? call.function : undefined;
    if (!isObject(fn) || typeof fn.name !== "string" || typeof fn.arguments !== "string") {
      throw badParam(`${param}[${j}]`, `${param}[${j}] must be {"id", "type": "function", "function": {"name", "arguments"}}`);
    }
    let args: unknown;
    try {
      args = JSON.parse(fn.arguments || "{}");
    } catch {
      throw badParam(`${param}[${j}].function.arguments`, `${param}[${j}].function.arguments must be a JSON object as a string`);
    }
    if (!isObject(args)) throw badParam(`${param}[${j}].function.arguments`, `${param}[${j}].function.arguments must be a JSON object as a string`);
    const { id, extra_content: extra } = call as Json;
    if (typeof id === "string") callNames.set(id, fn.name);
    const signature = ((extra as Json | undefined)?.google as Json | undefined)?.thought_signature;
    return {
      functionCall: { ...(typeof id === "string" ? { id } : {}), name: fn.name, args },
      ...(typeof signature === "string" ? { thoughtSignature: signature } : {}),
    };
  });
}

/** System, developer, assistant and tool content: a string, or text parts. */
function textParts(content: unknown, param: string): Json[] {
  if (typeof content === "string") return [{ text: content }];
  if (!Array.isArray(content)) throw badParam(param, `${param} must be a string or a list of content parts`);
  return content.map((part, j) => {
    if (isObject(part) && (part.type === "text" || part.type === "refusal")) {
      const text = part.type === "text" ? part.text : part.refusal;
      if (typeof text === "string") return { text };
    }
    throw badParam(`${param}[${j}]`, `${param}[${j}] must be a text part ({"type": "text", "text"})`);
  });
}

/** `data:<media type>;base64,<data>`, as OpenAI's image_url takes an inline image. */
const DATA_URI = /^data:([\w.+-]+\/[\w.+-]+);base64,(.*)$/s;

/** User content: a string, or text and image_url parts (a data URI becomes inlineData, an http(s) link fileData, which the service fetches). */
function userParts(content: unknown, param: string): Json[] {
  if (typeof content === "string") return [{ text: content }];
  if (!Array.isArray(content)) throw badParam(param, `${param} must be a string or a list of content parts`);
  return content.map((part, j) => {
    const at = `${param}[${j}]`;
    if (isObject(part) && part.type === "text" && typeof part.text === "string") return { text: part.text };
    if (!isObject(part) || part.type !== "image_url") {
      throw badParam(at, `${at} must be a text or an image_url part (other kinds, such as ${String((part as Json)?.type)}, are not offered)`);
    }
    const url = (part.image_url as Json | undefined)?.url;
    if (typeof url !== "string") throw badParam(`${at}.image_url.url`, `${at}.image_url.url must be a string`);
    const inline = DATA_URI.exec(url);
    if (inline) return { inlineData: { mimeType: inline[1]!.toLowerCase(), data: inline[2]! } };
    if (/^https?:\/\//i.test(url)) return { fileData: { fileUri: url } };
    throw badParam(`${at}.image_url.url`, `${at}.image_url.url must be an http(s) URL or a data URI (data:<media type>;base64,<data>)`);
  });
}
