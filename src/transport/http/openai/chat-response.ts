import { randomBytes } from "node:crypto";

/**
 * The vendor's generateContent answer (its JSON, lowerCamelCase) in OpenAI's
 * chat completion shapes: the whole answer, and one stream's chunks.
 */

type Json = Record<string, unknown>;

interface VendorPart {
  text?: string;
  thought?: boolean;
  functionCall?: { id?: string; name?: string; args?: unknown };
  thoughtSignature?: string;
}
interface VendorCandidate {
  content?: { parts?: VendorPart[] };
  finishReason?: string;
}
export interface VendorAnswer {
  candidates?: VendorCandidate[];
  usageMetadata?: { promptTokenCount?: number; candidatesTokenCount?: number; thoughtsTokenCount?: number };
  promptFeedback?: { blockReason?: string };
}

export interface OpenAiUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  completion_tokens_details: { reasoning_tokens: number };
}

export interface ToolCall {
  index?: number;
  id: string;
  type: "function";
  function: { name: string; arguments: string };
  /** The upstream's signature of its reasoning, which the caller replays with the call (where the vendor's own OpenAI API puts it). */
  extra_content?: { google: { thought_signature: string } };
}

/** The vendor's finish reasons that mean content was withheld. */
const FILTERED = new Set(["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"]);

/** STOP→stop, MAX_TOKENS→length, a withheld answer→content_filter, a function call→tool_calls; undefined while the answer goes on. */
export function finishReasonOf(vendor: string | undefined, calledTools: boolean): string | undefined {
  if (!vendor) return undefined;
  if (calledTools) return "tool_calls";
  if (vendor === "MAX_TOKENS") return "length";
  if (FILTERED.has(vendor)) return "content_filter";
  return "stop";
}

/** Output is candidates plus thinking, as both are charged at the output price; the reasoning share in its detail. */
export function usageOf(answer: VendorAnswer): OpenAiUsage {
  const usage = answer.usageMetadata ?? {};
  const prompt = usage.promptTokenCount ?? 0;
  const reasoning = usage.thoughtsTokenCount ?? 0;
  const completion = (usage.candidatesTokenCount ?? 0) + reasoning;
  const total = prompt + completion;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total, completion_tokens_details: { reasoning_tokens: reasoning } };
}

/** An id for a call the upstream gave none, unique enough to pair the tool's answer with it. */
const newCallId = () => `call_${randomBytes(12).toString("base64url")}`;

/** A candidate's text (thoughts left out: OpenAI's message has no place for them) and its function calls. */
export function candidateOutput(candidate: VendorCandidate | undefined): { text: string; toolCalls: ToolCall[] } {
  let text = "";
  const toolCalls: ToolCall[] = [];
  for (const part of candidate?.content?.parts ?? []) {
    if (part.functionCall) {
      const { id, name = "", args } = part.functionCall;
      const call: ToolCall = { id: id || newCallId(), type: "function", function: { name, arguments: JSON.stringify(args ?? {}) } };
      if (part.thoughtSignature) call.extra_content = { google: { thought_signature: part.thoughtSignature } };
      toolCalls.push(call);
    } else if (typeof part.text === "string" && !part.thought) text += part.text;
  }
  return { text, toolCalls };
}

export const completionId = () => `chatcmpl-${randomBytes(18).toString("base64url")}`;

/** The whole answer as OpenAI's `chat.completion`; a blocked prompt is one empty choice with finish_reason content_filter. */
export function chatCompletion(answer: VendorAnswer, model: string, id = completionId(), created = Math.floor(Date.now() / 1000)) {
  const candidate = answer.candidates?.[0];
  const { text, toolCalls } = candidateOutput(candidate);
  const blocked = candidate === undefined && Boolean(answer.promptFeedback?.blockReason);
  const message: Json = { role: "assistant", content: text === "" && (toolCalls.length > 0 || blocked) ? null : text, refusal: null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  const finish = blocked ? "content_filter" : (finishReasonOf(candidate?.finishReason, toolCalls.length > 0) ?? "stop");
  return {
    id, object: "chat.completion", created, model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
    usage: usageOf(answer),
  };
}

/**
 * One stream's chunks in OpenAI's `chat.completion.chunk` shape: the role
 * first, then each vendor chunk's text and calls as deltas, the finish reason
 * on the last; with include_usage every chunk carries `usage: null` and a
 * final chunk with no choices carries the usage.
 */
export class ChatChunks {
  readonly id = completionId();
  readonly created = Math.floor(Date.now() / 1000);
  private started = false;
  private calls = 0;
  private last: VendorAnswer = {};

  constructor(
    private readonly model: string,
    private readonly includeUsage: boolean,
  ) {}

  /** The OpenAI chunks of one vendor chunk (none when it carries nothing to say). */
  next(answer: VendorAnswer): Json[] {
    this.last = answer;
    const chunks: Json[] = [];
    if (!this.started) {
      this.started = true;
      chunks.push(this.chunk({ role: "assistant", content: "" }, null));
    }
    const candidate = answer.candidates?.[0];
    const { text, toolCalls } = candidateOutput(candidate);
    const delta: Json = {};
    if (text !== "") delta.content = text;
    if (toolCalls.length > 0) delta.tool_calls = toolCalls.map((call) => ({ index: this.calls++, ...call }));
    const blocked = candidate === undefined && Boolean(answer.promptFeedback?.blockReason);
    const finish = blocked ? "content_filter" : (finishReasonOf(candidate?.finishReason, this.calls > 0) ?? null);
    if (Object.keys(delta).length > 0 || finish) chunks.push(this.chunk(delta, finish));
    return chunks;
  }

  /** The usage chunk (when asked for): the last vendor chunk's usage, which is what was charged. */
  end(): Json[] {
    if (!this.includeUsage) return [];
    return [{ id: this.id, object: "chat.completion.chunk", created: this.created, model: this.model, choices: [], usage: usageOf(this.last) }];
  }

  private chunk(delta: Json, finish: string | null): Json {
    const chunk: Json = {
      id: this.id, object: "chat.completion.chunk", created: this.created, model: this.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    };
    if (this.includeUsage) chunk.usage = null;
    return chunk;
  }
}
