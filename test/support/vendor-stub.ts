import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { renderMp4 } from "../../src/adapters/provider/simulated/render-mp4.js";
import { renderPng } from "../../src/adapters/provider/simulated/render-png.js";

/**
 * A stand-in for the vendor's public REST API (see the notes' section 2), for
 * tests of the vendor provider adapter. It listens on 127.0.0.1 and speaks:
 *
 *   POST /v1beta/models/{model}:generateContent
 *   POST /v1beta/models/{model}:streamGenerateContent?alt=sse   (without alt=sse: one JSON array, as the vendor does)
 *   POST /v1beta/models/{model}:predictLongRunning              (video models, ids starting "videomodel-")
 *   GET  /v1beta/models/{model}/operations/{id}                 (poll)
 *   GET  /v1beta/files/{id}:download?alt=media                  (the finished MP4)
 *
 * Every request needs `x-vendor-api-key: <apiKey>`; errors use the vendor's
 * shape `{"error":{"code":<http>,"message","status":"<CANONICAL>"}}`.
 *
 * Content is a pure function of the request, so tests can predict it:
 *  - prompt = the last text part of the last content whose role is "user" (or absent).
 *  - tokens(s) = ceil(UTF-8 bytes of s / 4) — the service's own rule, so charges are easy to compute.
 *  - promptTokenCount = Σ tokens(part.text) over every text part of `contents` and
 *    `systemInstruction`, + 258 for every inline/file data part (input images).
 *  - Text answer = "Upstream answer to: <prompt>", cut to generationConfig.maxOutputTokens × 4
 *    bytes when that is smaller (then finishReason MAX_TOKENS, else STOP).
 *    candidatesTokenCount = tokens(answer text sent so far) (+ video tokens for omni).
 *  - Models whose id contains "pro" think: usage carries thoughtsTokenCount = 200 from the first
 *    chunk on; with thinkingConfig.includeThoughts a `thought: true` text part comes first.
 *  - totalTokenCount = promptTokenCount + candidatesTokenCount + thoughtsTokenCount.
 *  - Function calling: a request declaring functions (tools[].functionDeclarations) whose last content
 *    holds no functionResponse is answered with one functionCall part of the first declared function,
 *    args {"query": <prompt>} (stubFunctionCall), with a thoughtSignature; candidatesTokenCount is
 *    tokens(JSON of {name, args}). Once the last content holds a functionResponse, the text answer.
 *    Function call and response parts count as prompt as tokens(JSON of the call or response), and
 *    the declarations as tokens(JSON of tools).
 *  - Image models (id contains "image" or "nbx"): parts are [a `thought: true` draft PNG (pro models
 *    only)], ["Here is your image: <prompt>" unless responseModalities leaves out TEXT], then the final
 *    PNG (with thoughtSignature). The PNG's long side is 1024/2048/4096 for imageSize 1K/2K/4K
 *    (default 1K), the other side follows imageConfig.aspectRatio (default square). Output usage:
 *    IMAGE 1120 (1K, 2K) or 2000 (4K) per final image, TEXT tokens(text).
 *  - The omni model (id contains "omni") reports output split TEXT tokens(text) + VIDEO 258; in a
 *    stream the VIDEO share grows with the chunks: ceil(258 × sent / total).
 *  - Streams: a text answer is split into words (each with its trailing spaces), grouped
 *    ceil(words / 8) to an event, so 3 to 8 events (stubTextChunks); an image answer sends one
 *    part per event. Every event carries the cumulative usage, the last one the finishReason.
 *    Frames are `data: <json>\r\n\r\n`, with no [DONE].
 *  - Video: the MP4 is always 1280x720 (720x1280 for 9:16) whatever the resolution, 2 fps, with the
 *    requested durationSeconds (default 8); rendered once per size and duration per process.
 *
 * Switches (`delay`, `fault`) change how the next matching requests are answered; see VendorFault.
 */

export const VENDOR_KEY_HEADER = "x-vendor-api-key";
export const DEFAULT_STUB_API_KEY = "vendor-stub-key";
/** Prompt tokens for each input image (or file) part. */
export const INPUT_MEDIA_TOKENS = 258;
/** thoughtsTokenCount of thinking ("pro") models. */
export const THOUGHTS_TOKENS = 200;
/** Output tokens of one final image, by imageSize. */
export const IMAGE_OUTPUT_TOKENS: Readonly<Record<string, number>> = { "1K": 1120, "2K": 1120, "4K": 2000 };
/** Video output tokens of a complete omni answer. */
export const OMNI_VIDEO_TOKENS = 258;
export const STUB_VIDEO_FPS = 2;

export const ASPECT_RATIOS = ["1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9", "1:4", "4:1", "1:8", "8:1"];
export const IMAGE_SIZES = ["1K", "2K", "4K"];
const LONG_SIDE: Record<string, number> = { "1K": 1024, "2K": 2048, "4K": 4096 };

export type VendorPathKind = "generate" | "stream" | "predict" | "poll" | "download";
const ALL_KINDS: readonly VendorPathKind[] = ["generate", "stream", "predict", "poll", "download"];

/**
 * What a fault switch does to a matching request. `afterChunks` counts SSE events for streams;
 * for the other kinds any value > 0 means "after the first half of the body".
 */
export type VendorFault =
  /** Answer with this HTTP status and the vendor error JSON (429 adds QuotaFailure + RetryInfo). */
  | {
      kind: "status";
      status: number;
      message?: string;
      /** RetryInfo.retryDelay on 429, in seconds (default 1); null leaves RetryInfo out. */
      retryDelaySeconds?: number | null;
      /** A Retry-After header, in seconds. */
      retryAfterHeader?: number;
      /** Replaces the JSON body, e.g. an HTML page from a load balancer. */
      rawBody?: string;
      contentType?: string;
    }
  /** 200 whose body is cut in half (streams: afterChunks good events, then half an event, then the end). */
  | { kind: "malformed"; afterChunks?: number }
  /** Send the headers (and afterChunks events / half the body), then nothing until the client goes away. */
  | { kind: "stall"; afterChunks?: number }
  /**
   * Destroy the socket: before the headers (afterChunks 0, the default) or after afterChunks events /
   * half the body, graceMs (default 100) after writing them: a fetch body stream that errors drops
   * whatever its reader has not pulled yet, so the client needs a moment to see the bytes first.
   */
  | { kind: "drop"; afterChunks?: number; graceMs?: number }
  /** generate/stream: promptFeedback.blockReason, no candidates (a stream's first and only chunk). */
  | { kind: "blocked"; blockReason?: string }
  /** generate/stream: one candidate with finishReason (default IMAGE_SAFETY) and no content. */
  | { kind: "safety-finish"; finishReason?: string }
  /** generate/stream: an image model answers with text only (no image part). No effect on text models. */
  | { kind: "text-only" }
  /** predict/poll: the operation ends done:true with raiMediaFilteredCount 1 and no samples. */
  | { kind: "video-filtered"; reason?: string }
  /** predict/poll: the operation ends done:true with `error` (google.rpc.Status, default code 13). */
  | { kind: "operation-error"; code?: number; message?: string };

const FAULT_KINDS: Record<VendorFault["kind"], readonly VendorPathKind[]> = {
  status: ALL_KINDS,
  malformed: ALL_KINDS,
  stall: ALL_KINDS,
  drop: ALL_KINDS,
  blocked: ["generate", "stream"],
  "safety-finish": ["generate", "stream"],
  "text-only": ["generate", "stream"],
  "video-filtered": ["predict", "poll"],
  "operation-error": ["predict", "poll"],
};

export interface SwitchScope {
  /** Only the next N matching requests (default: every one until removed or reset). */
  times?: number;
  /** Only these path kinds (default: every kind the switch applies to). */
  on?: VendorPathKind | readonly VendorPathKind[];
  /** Only requests for this model id. */
  model?: string;
}

export interface VendorSwitch {
  /** Requests this switch has been applied to. */
  readonly hits: number;
  /** Uses left (undefined: unlimited). */
  readonly remaining: number | undefined;
  remove(): void;
}

export interface UsageMetadata {
  promptTokenCount: number;
  candidatesTokenCount?: number;
  thoughtsTokenCount?: number;
  totalTokenCount: number;
  promptTokensDetails?: { modality: string; tokenCount: number }[];
  candidatesTokensDetails?: { modality: string; tokenCount: number }[];
}

export interface VendorRequestRecord {
  /** Position in `stub.requests` (0-based, in the order bodies finished arriving). */
  readonly index: number;
  readonly method: string;
  /** Path without the query, e.g. /v1beta/models/aimodel-3.5-flash:generateContent. */
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly kind: VendorPathKind | "unknown";
  readonly model: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly rawBody: string;
  /** The parsed JSON body; undefined if empty or not JSON. */
  readonly body: unknown;
  /** Date.now() when the request head arrived. */
  readonly receivedAt: number;
  /** Delay a switch applied before answering. */
  readonly latencyMs: number;
  readonly fault: VendorFault | undefined;
  /** HTTP status sent (undefined until headers go out, and for connections dropped before them). */
  readonly status: number | undefined;
  /** Date.now() when the headers went out. */
  readonly respondedAt: number | undefined;
  /** SSE events written in full. */
  readonly chunksSent: number;
  /** JSON documents sent: the body of a JSON answer, or each SSE event's payload. */
  readonly sent: readonly unknown[];
  /** The last usageMetadata sent, i.e. what a client that read everything has been told. */
  readonly lastUsage: UsageMetadata | undefined;
  /** The whole response was written. */
  readonly finished: boolean;
  /** The client closed the connection before the response was complete. */
  readonly clientClosed: boolean;
  /** The stub cut the connection (drop switch, or stub.close() with the request open). */
  readonly closedByStub: boolean;
  /** Date.now() when the connection (or, for a finished response, the exchange) closed. */
  readonly closedAt: number | undefined;
}

type MutableRecord = { -readonly [K in keyof VendorRequestRecord]: VendorRequestRecord[K] } & { sent: unknown[] };

export interface WaitOptions {
  timeoutMs?: number;
  what?: string;
}

export interface VendorStubOptions {
  apiKey?: string;
  /** Polls that answer done:false before an operation completes (default 1). */
  videoPendingPolls?: number;
  /** Pause between SSE events (default 0). */
  chunkIntervalMs?: number;
  /** When given, other model ids answer 404 NOT_FOUND. */
  knownModels?: readonly string[];
}

export interface VendorStub {
  /** Base URL without a trailing slash and without /v1beta, e.g. http://127.0.0.1:40123. */
  readonly url: string;
  readonly apiKey: string;
  readonly requests: readonly VendorRequestRecord[];
  /** Read when an operation starts: polls answered done:false before it completes. */
  videoPendingPolls: number;
  chunkIntervalMs: number;
  /** Wait `ms` before answering matching requests (applies before faults). */
  delay(ms: number, scope?: SwitchScope): VendorSwitch;
  fault(fault: VendorFault, scope?: SwitchScope): VendorSwitch;
  /** Resolves with the probe's first truthy value, re-evaluated on every change of a request record; a throwing probe rejects. */
  waitFor<T>(probe: (requests: readonly VendorRequestRecord[]) => T | undefined | null | false, options?: WaitOptions): Promise<T>;
  /** Request #index has arrived (body read). */
  waitForRequest(index: number, options?: WaitOptions): Promise<VendorRequestRecord>;
  /** The client closed request #index's connection before its response was complete; rejects if the response completed or the stub cut it. */
  waitForClientClose(index: number, options?: WaitOptions): Promise<VendorRequestRecord>;
  /** Forget requests, switches and operations; restore option defaults. */
  reset(): void;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------
// Pure content rules (exported so tests can predict the stub's answers)

export const stubTokens = (text: string) => Math.ceil(Buffer.byteLength(text, "utf8") / 4);
export const stubAnswer = (prompt: string) => `Upstream answer to: ${prompt}`;
export const stubImageCaption = (prompt: string) => `Here is your image: ${prompt}`;
export const isImageModel = (model: string) => model.includes("image") || model.includes("nbx");
export const isThinkingModel = (model: string) => model.includes("pro");
export const isOmniModel = (model: string) => model.includes("omni");
export const isVideoModel = (model: string) => model.startsWith("videomodel-");

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
/** proto3 JSON: parsers accept lowerCamelCase and the original snake_case names. */
const field = (o: unknown, camel: string): unknown => {
  if (!isObject(o)) return undefined;
  if (camel in o) return o[camel];
  return o[camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)];
};
const partsOf = (content: unknown): unknown[] => {
  const parts = field(content, "parts");
  return Array.isArray(parts) ? parts : [];
};
const isMediaPart = (part: unknown) => field(part, "inlineData") !== undefined || field(part, "fileData") !== undefined;

/** The last text part of the last user content. */
export function stubPromptText(body: unknown): string {
  const contents = field(body, "contents");
  if (!Array.isArray(contents)) return "";
  for (let i = contents.length - 1; i >= 0; i--) {
    const role = field(contents[i], "role");
    if (role !== undefined && role !== "user") continue;
    const parts = partsOf(contents[i]);
    for (let j = parts.length - 1; j >= 0; j--) {
      const text = field(parts[j], "text");
      if (typeof text === "string") return text;
    }
  }
  return "";
}

export function stubPromptTokens(body: unknown): { total: number; text: number; media: number } {
  const contents = field(body, "contents");
  const all = [...(Array.isArray(contents) ? contents : []), field(body, "systemInstruction")];
  let text = 0;
  let media = 0;
  for (const content of all) {
    for (const part of partsOf(content)) {
      const t = field(part, "text");
      if (typeof t === "string") text += stubTokens(t);
      const call = field(part, "functionCall") ?? field(part, "functionResponse");
      if (call !== undefined) text += stubTokens(JSON.stringify(call));
      if (isMediaPart(part)) media += INPUT_MEDIA_TOKENS;
    }
  }
  const tools = field(body, "tools");
  if (Array.isArray(tools) && tools.length > 0) text += stubTokens(JSON.stringify(tools));
  return { total: text + media, text, media };
}

/** The call the stub answers a request declaring functions with: the first declaration, asked the prompt. */
export function stubFunctionCall(body: unknown): { name: string; args: { query: string } } | undefined {
  const tools = field(body, "tools");
  const declarations = (Array.isArray(tools) ? tools : []).flatMap((tool) => {
    const list = field(tool, "functionDeclarations");
    return Array.isArray(list) ? list : [];
  });
  const name = field(declarations[0], "name");
  if (typeof name !== "string") return undefined;
  const contents = field(body, "contents");
  const last = Array.isArray(contents) ? contents[contents.length - 1] : undefined;
  if (partsOf(last).some((part) => field(part, "functionResponse") !== undefined)) return undefined;
  return { name, args: { query: stubPromptText(body) } };
}

/** Cuts to a token budget on a character boundary (tokens = bytes / 4). */
function truncateToTokens(text: string, maxTokens: number | undefined): { text: string; truncated: boolean } {
  if (maxTokens === undefined || stubTokens(text) <= maxTokens) return { text, truncated: false };
  const cut = Buffer.from(text, "utf8").subarray(0, Math.max(0, maxTokens) * 4).toString("utf8").replace(/\uFFFD+$/, "");
  return { text: cut, truncated: true };
}

/** The stream's text deltas for an answer. */
export function stubTextChunks(answer: string): string[] {
  const words = answer.match(/\S+\s*/g) ?? [answer];
  const size = Math.max(1, Math.ceil(words.length / 8));
  const chunks: string[] = [];
  for (let i = 0; i < words.length; i += size) chunks.push(words.slice(i, i + size).join(""));
  return chunks;
}

export function stubImageSize(aspectRatio: string | undefined, imageSize: string | undefined, longSide?: number) {
  const long = longSide ?? LONG_SIDE[imageSize ?? "1K"] ?? 1024;
  const [w, h] = (aspectRatio ?? "1:1").split(":").map(Number) as [number, number];
  const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);
  return w >= h ? { width: long, height: even((long * h) / w) } : { width: even((long * w) / h), height: long };
}

interface GenerationSettings {
  maxOutputTokens: number | undefined;
  aspectRatio: string | undefined;
  imageSize: string | undefined;
  wantsText: boolean;
  includeThoughts: boolean;
}

function settingsOf(body: unknown): GenerationSettings {
  const config = field(body, "generationConfig");
  const imageConfig = field(config, "imageConfig");
  const modalities = field(config, "responseModalities");
  const max = field(config, "maxOutputTokens");
  return {
    maxOutputTokens: typeof max === "number" ? max : undefined,
    aspectRatio: field(imageConfig, "aspectRatio") as string | undefined,
    imageSize: field(imageConfig, "imageSize") as string | undefined,
    wantsText: !Array.isArray(modalities) || modalities.includes("TEXT"),
    includeThoughts: field(field(config, "thinkingConfig"), "includeThoughts") === true,
  };
}

/** One answer part; a stream sends one piece (or, for text, one group of words) per event. */
interface Piece {
  part: Json;
  /** Answer text carried by this piece (not thoughts). */
  text: string;
  imageTokens: number;
  /** Output tokens of a function call piece. */
  callTokens?: number;
}

interface AnswerPlan {
  model: string;
  responseId: string;
  prompt: { total: number; text: number; media: number };
  pieces: Piece[];
  finishReason: string;
}

function planAnswer(model: string, body: unknown, fault: VendorFault | undefined): AnswerPlan {
  const prompt = stubPromptText(body);
  const settings = settingsOf(body);
  const pieces: Piece[] = [];
  let finishReason = "STOP";
  if (isThinkingModel(model) && settings.includeThoughts) {
    pieces.push({ part: { text: `Thinking about: ${prompt}`, thought: true }, text: "", imageTokens: 0 });
  }
  const call = isImageModel(model) ? undefined : stubFunctionCall(body);
  if (call) {
    const part = { functionCall: call, thoughtSignature: Buffer.from(`signature of ${call.name}`).toString("base64") };
    pieces.push({ part, text: "", imageTokens: 0, callTokens: stubTokens(JSON.stringify(call)) });
  } else if (isImageModel(model) && fault?.kind !== "text-only") {
    const seed = `${model}\n${prompt}`;
    if (isThinkingModel(model)) {
      const draft = stubImageSize(settings.aspectRatio, undefined, 256);
      const data = renderPng({ ...draft, seed: `draft\n${seed}` }).toString("base64");
      pieces.push({ part: { inlineData: { mimeType: "image/png", data }, thought: true }, text: "", imageTokens: 0 });
    }
    if (settings.wantsText) {
      const caption = stubImageCaption(prompt);
      pieces.push({ part: { text: caption }, text: caption, imageTokens: 0 });
    }
    const size = stubImageSize(settings.aspectRatio, settings.imageSize);
    const data = renderPng({ ...size, seed }).toString("base64");
    pieces.push({
      part: { inlineData: { mimeType: "image/png", data }, thoughtSignature: randomBytes(24).toString("base64") },
      text: "",
      imageTokens: IMAGE_OUTPUT_TOKENS[settings.imageSize ?? "1K"] ?? 1120,
    });
  } else {
    const answer = isImageModel(model) ? stubImageCaption(prompt) : stubAnswer(prompt);
    const { text, truncated } = truncateToTokens(answer, isImageModel(model) ? undefined : settings.maxOutputTokens);
    if (truncated) finishReason = "MAX_TOKENS";
    for (const delta of stubTextChunks(text)) pieces.push({ part: { text: delta }, text: delta, imageTokens: 0 });
  }
  return { model, responseId: randomBytes(12).toString("base64url"), prompt: stubPromptTokens(body), pieces, finishReason };
}

function promptDetails(plan: AnswerPlan) {
  const details = [{ modality: "TEXT", tokenCount: plan.prompt.text }];
  if (plan.prompt.media > 0) details.push({ modality: "IMAGE", tokenCount: plan.prompt.media });
  return details;
}

/** Usage after the first `sent` pieces: cumulative, as the vendor reports it on every chunk. */
function usageAfter(plan: AnswerPlan, sent: number): UsageMetadata {
  const pieces = plan.pieces.slice(0, sent);
  const text = stubTokens(pieces.map((p) => p.text).join(""));
  const image = pieces.reduce((sum, p) => sum + p.imageTokens, 0);
  const video = isOmniModel(plan.model) ? Math.ceil((OMNI_VIDEO_TOKENS * sent) / plan.pieces.length) : 0;
  const thoughts = isThinkingModel(plan.model) ? THOUGHTS_TOKENS : 0;
  const calls = pieces.reduce((sum, p) => sum + (p.callTokens ?? 0), 0);
  const candidates = text + image + video + calls;
  const details: { modality: string; tokenCount: number }[] = [];
  if (text + calls > 0 || (image === 0 && video === 0)) details.push({ modality: "TEXT", tokenCount: text + calls });
  if (image > 0) details.push({ modality: "IMAGE", tokenCount: image });
  if (video > 0) details.push({ modality: "VIDEO", tokenCount: video });
  return {
    promptTokenCount: plan.prompt.total,
    candidatesTokenCount: candidates,
    ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}),
    totalTokenCount: plan.prompt.total + candidates + thoughts,
    promptTokensDetails: promptDetails(plan),
    candidatesTokensDetails: details,
  };
}

function responseOf(plan: AnswerPlan, parts: Json[], usage: UsageMetadata, finishReason: string | undefined): Json {
  const candidate: Json = { content: { role: "model", parts }, ...(finishReason ? { finishReason } : {}), index: 0 };
  return { candidates: [candidate], usageMetadata: usage, modelVersion: plan.model, responseId: plan.responseId };
}

/** The whole answer in one response: adjacent answer-text parts merged, as generateContent does. */
function wholeResponse(plan: AnswerPlan): Json {
  const parts: Json[] = [];
  for (const piece of plan.pieces) {
    const last = parts[parts.length - 1];
    if (piece.text && last && typeof last.text === "string" && !last.thought) last.text += piece.text;
    else parts.push({ ...piece.part });
  }
  return responseOf(plan, parts, usageAfter(plan, plan.pieces.length), plan.finishReason);
}

function streamChunks(plan: AnswerPlan): Json[] {
  return plan.pieces.map((piece, i) => {
    const last = i === plan.pieces.length - 1;
    return responseOf(plan, [piece.part], usageAfter(plan, i + 1), last ? plan.finishReason : undefined);
  });
}

/** A fault that replaces the answer with one of the vendor's refusals. */
function refusalOf(model: string, body: unknown, fault: VendorFault | undefined): Json | undefined {
  const prompt = stubPromptTokens(body).total;
  const base = { usageMetadata: { promptTokenCount: prompt, totalTokenCount: prompt }, modelVersion: model, responseId: randomBytes(12).toString("base64url") };
  if (fault?.kind === "blocked") {
    const ratings = ["HARM_CATEGORY_SEXUALLY_EXPLICIT", "HARM_CATEGORY_HATE_SPEECH", "HARM_CATEGORY_HARASSMENT", "HARM_CATEGORY_DANGEROUS_CONTENT"]
      .map((category) => ({ category, probability: category === "HARM_CATEGORY_DANGEROUS_CONTENT" ? "HIGH" : "NEGLIGIBLE" }));
    return { promptFeedback: { blockReason: fault.blockReason ?? "SAFETY", safetyRatings: ratings }, ...base };
  }
  if (fault?.kind === "safety-finish") {
    return { candidates: [{ finishReason: fault.finishReason ?? "IMAGE_SAFETY", index: 0 }], ...base };
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Errors

const CANONICAL: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  408: "DEADLINE_EXCEEDED",
  409: "ABORTED",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  501: "UNIMPLEMENTED",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

export function canonicalStatus(code: number): string {
  return CANONICAL[code] ?? (code >= 500 ? "UNKNOWN" : "FAILED_PRECONDITION");
}

const DEFAULT_MESSAGES: Record<number, string> = {
  429: "Resource has been exhausted (e.g. check quota).",
  500: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
  503: "The model is overloaded. Please try again later.",
  504: "Deadline expired before operation could complete.",
};

export function vendorError(code: number, message?: string, retryDelaySeconds?: number | null): Json {
  const error: Json = { code, message: message ?? DEFAULT_MESSAGES[code] ?? `Upstream error ${code}.`, status: canonicalStatus(code) };
  if (code === 429) {
    const details: Json[] = [
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        violations: [{ quotaMetric: "generativelanguage.googleapis.com/generate_content_requests", quotaId: "GenerateRequestsPerMinutePerProjectPerModel" }],
      },
    ];
    if (retryDelaySeconds !== null) {
      details.push({ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${retryDelaySeconds ?? 1}s` });
    }
    error.details = details;
  }
  return { error };
}

// ---------------------------------------------------------------------------
// Video

interface Operation {
  name: string;
  id: string;
  model: string;
  width: number;
  height: number;
  durationSeconds: number;
  pendingPolls: number;
  polls: number;
  /** A poll has answered done:true; later polls repeat it. */
  done: boolean;
  ending: { kind: "ok" } | { kind: "filtered"; reason: string } | { kind: "error"; code: number; message: string };
}

const videoCache = new Map<string, Promise<Buffer>>();

/** One render per size and duration per process: the encoder costs a few hundred ms. */
function stubVideo(width: number, height: number, durationSeconds: number): Promise<Buffer> {
  const key = `${width}x${height}:${durationSeconds}`;
  let video = videoCache.get(key);
  if (!video) {
    video = renderMp4({ width, height, durationSeconds, seed: "vendor stub video", framesPerSecond: STUB_VIDEO_FPS });
    videoCache.set(key, video);
    video.catch(() => videoCache.delete(key));
  }
  return video;
}

// ---------------------------------------------------------------------------
// Server

interface Rule {
  type: "delay" | "fault";
  ms: number;
  fault: VendorFault | undefined;
  kinds: readonly VendorPathKind[];
  model: string | undefined;
  remaining: number | undefined;
  hits: number;
  removed: boolean;
}

type Reply =
  | { type: "json"; status: number; body: unknown; headers?: Record<string, string> }
  | { type: "sse"; chunks: Json[] }
  | { type: "bytes"; status: number; contentType: string; bytes: Buffer }
  | { type: "raw"; status: number; contentType: string; text: string; headers?: Record<string, string> };

interface Route {
  kind: VendorPathKind | "unknown";
  model?: string;
  id?: string;
}

function routeOf(method: string, path: string): Route {
  let m = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent|predictLongRunning)$/.exec(path);
  if (m && method === "POST") {
    const kind = m[2] === "generateContent" ? "generate" : m[2] === "streamGenerateContent" ? "stream" : "predict";
    return { kind, model: decodeURIComponent(m[1]!) };
  }
  m = /^\/v1beta\/models\/([^/:]+)\/operations\/([^/:]+)$/.exec(path);
  if (m && method === "GET") return { kind: "poll", model: decodeURIComponent(m[1]!), id: m[2]! };
  m = /^\/v1beta\/files\/([^/:]+):download$/.exec(path);
  if (m && method === "GET") return { kind: "download", id: m[1]! };
  return { kind: "unknown" };
}

const json = (status: number, body: unknown, headers?: Record<string, string>): Reply => ({ type: "json", status, body, ...(headers ? { headers } : {}) });
const errorReply = (status: number, message: string) => json(status, vendorError(status, message));

export async function startVendorStub(options: VendorStubOptions = {}): Promise<VendorStub> {
  const apiKey = options.apiKey ?? DEFAULT_STUB_API_KEY;
  const changes = new EventEmitter();
  changes.setMaxListeners(0);
  let requests: MutableRecord[] = [];
  let rules: Rule[] = [];
  let operations = new Map<string, Operation>();
  const open = new Set<{ record: MutableRecord; res: ServerResponse }>();
  const shutdown = new AbortController();
  let baseUrl = "";

  const changed = () => changes.emit("change");

  function pick(type: Rule["type"], kind: VendorPathKind, model: string | undefined): Rule | undefined {
    const rule = rules.find(
      (r) => r.type === type && !r.removed && r.remaining !== 0 && r.kinds.includes(kind) && (r.model === undefined || r.model === model),
    );
    if (rule) {
      rule.hits++;
      if (rule.remaining !== undefined) rule.remaining--;
    }
    return rule;
  }

  function addRule(type: Rule["type"], ms: number, fault: VendorFault | undefined, scope: SwitchScope): VendorSwitch {
    const applicable = fault ? FAULT_KINDS[fault.kind] : ALL_KINDS;
    const wanted = scope.on === undefined ? ALL_KINDS : typeof scope.on === "string" ? [scope.on] : scope.on;
    const rule: Rule = {
      type, ms, fault,
      kinds: wanted.filter((k) => applicable.includes(k)),
      model: scope.model,
      remaining: scope.times,
      hits: 0,
      removed: false,
    };
    if (rule.kinds.length === 0) throw new Error(`a ${fault?.kind} fault cannot apply to ${String(scope.on)}`);
    rules.push(rule);
    return {
      get hits() { return rule.hits; },
      get remaining() { return rule.remaining; },
      remove() { rule.removed = true; },
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://stub.invalid");
    const route = routeOf(req.method ?? "GET", url.pathname);
    const record: MutableRecord = {
      index: -1,
      method: req.method ?? "GET",
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      kind: route.kind,
      model: route.model,
      headers: req.headers,
      rawBody: "",
      body: undefined,
      receivedAt: Date.now(),
      latencyMs: 0,
      fault: undefined,
      status: undefined,
      respondedAt: undefined,
      chunksSent: 0,
      sent: [],
      lastUsage: undefined,
      finished: false,
      clientClosed: false,
      closedByStub: false,
      closedAt: undefined,
    };
    const gone = new AbortController();
    const entry = { record, res };
    open.add(entry);
    res.on("close", () => {
      open.delete(entry);
      record.finished = res.writableFinished;
      if (!record.finished && !record.closedByStub) record.clientClosed = true;
      record.closedAt = Date.now();
      gone.abort();
      changed();
    });
    const keep = () => {
      record.index = requests.length;
      requests.push(record);
      changed();
    };

    const chunks: Buffer[] = [];
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    } catch {
      keep();
      return;
    }
    record.rawBody = Buffer.concat(chunks).toString("utf8");
    try {
      record.body = record.rawBody ? JSON.parse(record.rawBody) : undefined;
    } catch {
      record.body = undefined;
    }
    keep();

    if (route.kind === "unknown") {
      return send(errorReply(404, `Method or path not found: ${record.method} ${record.path}`), undefined);
    }
    const delay = pick("delay", route.kind, route.model);
    const fault = pick("fault", route.kind, route.model)?.fault;
    record.fault = fault;
    if (delay) {
      record.latencyMs = delay.ms;
      changed();
      try {
        await sleep(delay.ms, undefined, { signal: AbortSignal.any([gone.signal, shutdown.signal]) });
      } catch {
        return;
      }
    }
    if (fault?.kind === "status") {
      const headers: Record<string, string> = fault.retryAfterHeader !== undefined ? { "retry-after": String(fault.retryAfterHeader) } : {};
      if (fault.rawBody !== undefined) {
        return send({ type: "raw", status: fault.status, contentType: fault.contentType ?? "text/html; charset=UTF-8", text: fault.rawBody, headers }, undefined);
      }
      return send(json(fault.status, vendorError(fault.status, fault.message, fault.retryDelaySeconds), headers), undefined);
    }
    if (fault?.kind === "drop" && (fault.afterChunks ?? 0) === 0) return dropConnection();

    let reply: Reply;
    if (req.headers[VENDOR_KEY_HEADER] !== apiKey) {
      reply = errorReply(401, req.headers[VENDOR_KEY_HEADER] === undefined
        ? `Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API (header ${VENDOR_KEY_HEADER}).`
        : "API key not valid. Please pass a valid API key.");
    } else {
      try {
        reply = await answer(route, url, record, fault);
      } catch (error) {
        reply = errorReply(500, `stub failure: ${String(error)}`);
      }
    }
    return send(reply, fault);

    function dropConnection() {
      record.closedByStub = true;
      req.socket.destroy();
    }

    function head(status: number, headers: Record<string, string | number>) {
      res.writeHead(status, headers);
      res.flushHeaders();
      record.status = status;
      record.respondedAt = Date.now();
      changed();
    }

    async function send(reply: Reply, fault: VendorFault | undefined): Promise<void> {
      if (res.destroyed) return;
      const cut = fault && (fault.kind === "malformed" || fault.kind === "stall" || fault.kind === "drop") ? fault : undefined;
      if (reply.type === "sse") {
        head(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        const limit = cut ? Math.min(cut.afterChunks ?? 0, cut.kind === "malformed" ? reply.chunks.length - 1 : reply.chunks.length) : reply.chunks.length;
        for (let i = 0; i < limit; i++) {
          if (i > 0 && stub.chunkIntervalMs > 0) {
            try {
              await sleep(stub.chunkIntervalMs, undefined, { signal: AbortSignal.any([gone.signal, shutdown.signal]) });
            } catch {
              return;
            }
          }
          if (res.destroyed) return;
          const chunk = reply.chunks[i]!;
          res.write(`data: ${JSON.stringify(chunk)}\r\n\r\n`);
          record.chunksSent++;
          record.sent.push(chunk);
          if (isObject(chunk.usageMetadata)) record.lastUsage = chunk.usageMetadata as unknown as UsageMetadata;
          changed();
        }
        if (!cut) return void res.end();
        if (cut.kind === "stall") return;
        if (cut.kind === "drop") return dropAfterGrace(cut.graceMs);
        const broken = JSON.stringify(reply.chunks[limit]);
        return void res.end(`data: ${broken.slice(0, Math.floor(broken.length / 2))}\r\n\r\n`);
      }

      let payload: Buffer;
      let contentType: string;
      const headers: Record<string, string> = reply.type === "json" || reply.type === "raw" ? { ...reply.headers } : {};
      if (reply.type === "json") {
        payload = Buffer.from(JSON.stringify(reply.body));
        contentType = "application/json; charset=UTF-8";
      } else if (reply.type === "raw") {
        payload = Buffer.from(reply.text);
        contentType = reply.contentType;
      } else {
        payload = reply.bytes;
        contentType = reply.contentType;
      }
      const half = payload.subarray(0, Math.floor(payload.length / 2));
      if (reply.type === "json") record.sent.push(reply.body);
      if (!cut) {
        head(reply.status, { ...headers, "content-type": contentType, "content-length": payload.length });
        res.end(payload);
        if (reply.type === "json") {
          const last = Array.isArray(reply.body) ? reply.body[reply.body.length - 1] : reply.body;
          const usage = field(last, "usageMetadata");
          if (isObject(usage)) record.lastUsage = usage as unknown as UsageMetadata;
          changed();
        }
        return;
      }
      if (cut.kind === "malformed") {
        head(reply.status, { ...headers, "content-type": contentType, "content-length": half.length });
        return void res.end(half);
      }
      if (cut.kind === "stall") {
        head(reply.status, { ...headers, "content-type": contentType });
        if ((cut.afterChunks ?? 0) > 0) res.write(half);
        return;
      }
      head(reply.status, { ...headers, "content-type": contentType, "content-length": payload.length });
      res.write(half);
      return dropAfterGrace(cut.kind === "drop" ? cut.graceMs : undefined);
    }

    async function dropAfterGrace(graceMs = 100): Promise<void> {
      try {
        await sleep(graceMs, undefined, { signal: AbortSignal.any([gone.signal, shutdown.signal]) });
      } catch {
        return;
      }
      dropConnection();
    }
  }

  async function answer(route: Route, url: URL, record: MutableRecord, fault: VendorFault | undefined): Promise<Reply> {
    const model = route.model;
    if (model !== undefined && options.knownModels && !options.knownModels.includes(model)) {
      return errorReply(404, `models/${model} is not found for API version v1beta, or is not supported for this method.`);
    }
    switch (route.kind) {
      case "generate":
      case "stream":
        return generate(route.kind, model!, record, url, fault);
      case "predict":
        return predict(model!, record, fault);
      case "poll":
        return poll(model!, route.id!, fault);
      case "download":
        return download(route.id!);
      default:
        return errorReply(404, "Not found.");
    }
  }

  function validateGenerate(model: string, record: MutableRecord): Reply | undefined {
    if (isVideoModel(model)) {
      return errorReply(404, `models/${model} is not found for API version v1beta, or is not supported for generateContent.`);
    }
    const body = record.body;
    if (!isObject(body)) return errorReply(400, `Invalid JSON payload received. ${record.rawBody ? "Unexpected token." : "Empty body."}`);
    const contents = field(body, "contents");
    if (!Array.isArray(contents) || contents.length === 0) return errorReply(400, "* GenerateContentRequest.contents: contents is not specified");
    for (const content of contents) {
      if (!Array.isArray(field(content, "parts"))) return errorReply(400, "* GenerateContentRequest.contents[].parts: contents.parts must not be empty.");
    }
    const settings = settingsOf(body);
    if (settings.aspectRatio !== undefined && !ASPECT_RATIOS.includes(settings.aspectRatio)) {
      return errorReply(400, `* GenerateContentRequest.generation_config.image_config.aspect_ratio: unsupported aspect ratio ${JSON.stringify(settings.aspectRatio)}`);
    }
    if (settings.imageSize !== undefined && !IMAGE_SIZES.includes(settings.imageSize)) {
      return errorReply(400, `* GenerateContentRequest.generation_config.image_config.image_size: unsupported image size ${JSON.stringify(settings.imageSize)}`);
    }
    return undefined;
  }

  function generate(kind: "generate" | "stream", model: string, record: MutableRecord, url: URL, fault: VendorFault | undefined): Reply {
    const invalid = validateGenerate(model, record);
    if (invalid) return invalid;
    const refusal = refusalOf(model, record.body, fault);
    if (refusal) {
      return kind === "generate" ? json(200, refusal) : url.searchParams.get("alt") === "sse" ? { type: "sse", chunks: [refusal] } : json(200, [refusal]);
    }
    const plan = planAnswer(model, record.body, fault);
    if (kind === "generate") return json(200, wholeResponse(plan));
    const chunks = streamChunks(plan);
    // Without alt=sse the vendor streams one JSON array instead of events.
    return url.searchParams.get("alt") === "sse" ? { type: "sse", chunks } : json(200, chunks);
  }

  function predict(model: string, record: MutableRecord, fault: VendorFault | undefined): Reply {
    if (!isVideoModel(model)) {
      return errorReply(404, `models/${model} is not found for API version v1beta, or is not supported for predictLongRunning.`);
    }
    const body = record.body;
    if (!isObject(body)) return errorReply(400, "Invalid JSON payload received.");
    const instances = body.instances;
    const prompt = Array.isArray(instances) ? field(instances[0], "prompt") : undefined;
    if (typeof prompt !== "string" || prompt.length === 0) return errorReply(400, "* instances[0].prompt: a prompt is required.");
    const parameters = isObject(body.parameters) ? body.parameters : {};
    const duration = field(parameters, "durationSeconds") ?? 8;
    if (typeof duration !== "number" || !Number.isInteger(duration) || duration < 1 || duration > 8) {
      return errorReply(400, `The number value for \`durationSeconds\` is out of bound. Please provide a value between 1 and 8, inclusive.`);
    }
    const resolution = field(parameters, "resolution");
    if (resolution !== undefined && !["720p", "1080p", "4k"].includes(resolution as string)) {
      return errorReply(400, `Unsupported resolution ${JSON.stringify(resolution)}; use 720p, 1080p or 4k.`);
    }
    const aspectRatio = field(parameters, "aspectRatio");
    if (aspectRatio !== undefined && aspectRatio !== "16:9" && aspectRatio !== "9:16") {
      return errorReply(400, `Unsupported aspect ratio ${JSON.stringify(aspectRatio)}; use 16:9 or 9:16.`);
    }
    const id = randomBytes(6).toString("hex");
    const [width, height] = aspectRatio === "9:16" ? [720, 1280] : [1280, 720];
    const operation: Operation = {
      name: `models/${model}/operations/${id}`,
      id,
      model,
      width,
      height,
      durationSeconds: duration,
      pendingPolls: stub.videoPendingPolls,
      polls: 0,
      done: false,
      ending: endingOf(fault) ?? { kind: "ok" },
    };
    operations.set(id, operation);
    // Start encoding now so the download does not wait for it.
    stubVideo(width, height, duration).catch(() => {});
    return json(200, { name: operation.name });
  }

  function endingOf(fault: VendorFault | undefined): Operation["ending"] | undefined {
    if (fault?.kind === "video-filtered") {
      return { kind: "filtered", reason: fault.reason ?? "Your video could not be generated because it violates the usage guidelines." };
    }
    if (fault?.kind === "operation-error") {
      return { kind: "error", code: fault.code ?? 13, message: fault.message ?? "Video generation failed due to an internal error." };
    }
    return undefined;
  }

  function poll(model: string, id: string, fault: VendorFault | undefined): Reply {
    const operation = operations.get(id);
    if (!operation || operation.model !== model) return errorReply(404, `Operation models/${model}/operations/${id} not found.`);
    operation.polls++;
    const forced = endingOf(fault);
    if (forced) operation.ending = forced;
    if (!operation.done && !forced && operation.polls <= operation.pendingPolls) return json(200, { name: operation.name, done: false });
    operation.done = true;
    const ending = operation.ending;
    if (ending.kind === "error") return json(200, { name: operation.name, done: true, error: { code: ending.code, message: ending.message } });
    const type = "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse";
    if (ending.kind === "filtered") {
      return json(200, {
        name: operation.name,
        done: true,
        response: { "@type": type, generateVideoResponse: { raiMediaFilteredCount: 1, raiMediaFilteredReasons: [ending.reason] } },
      });
    }
    const uri = `${baseUrl}/v1beta/files/${operation.id}:download?alt=media`;
    return json(200, {
      name: operation.name,
      done: true,
      response: { "@type": type, generateVideoResponse: { generatedSamples: [{ video: { uri } }] } },
    });
  }

  async function download(id: string): Promise<Reply> {
    const operation = operations.get(id);
    if (!operation || operation.ending.kind !== "ok" || !operation.done) {
      return errorReply(404, `File files/${id} not found.`);
    }
    const bytes = await stubVideo(operation.width, operation.height, operation.durationSeconds);
    return { type: "bytes", status: 200, contentType: "video/mp4", bytes };
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify(vendorError(500, `stub failure: ${String(error)}`)));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function waitFor<T>(probe: (requests: readonly VendorRequestRecord[]) => T | undefined | null | false, waitOptions: WaitOptions = {}): Promise<T> {
    const { timeoutMs = 5_000, what = "a condition on the stub's requests" } = waitOptions;
    return new Promise<T>((resolve, reject) => {
      const check = () => {
        let value: T | undefined | null | false;
        try {
          value = probe(requests);
        } catch (error) {
          finish();
          return reject(error);
        }
        if (value) {
          finish();
          resolve(value);
        }
      };
      const timer = setTimeout(() => {
        finish();
        const seen = requests.map((r) => `#${r.index} ${r.method} ${r.path} status=${r.status} chunks=${r.chunksSent} closed=${r.closedAt !== undefined}`);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; requests: [${seen.join("; ")}]`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        changes.off("change", check);
      };
      changes.on("change", check);
      check();
    });
  }

  const stub: VendorStub = {
    url: baseUrl,
    apiKey,
    get requests() {
      return requests;
    },
    videoPendingPolls: options.videoPendingPolls ?? 1,
    chunkIntervalMs: options.chunkIntervalMs ?? 0,
    delay: (ms, scope = {}) => addRule("delay", ms, undefined, scope),
    fault: (fault, scope = {}) => addRule("fault", 0, fault, scope),
    waitFor,
    waitForRequest: (index, waitOptions) => waitFor((all) => all[index], { what: `request #${index} to arrive`, ...waitOptions }),
    waitForClientClose: (index, waitOptions) =>
      waitFor(
        (all) => {
          const record = all[index];
          if (!record || record.closedAt === undefined) return undefined;
          if (record.clientClosed) return record;
          throw new Error(`request #${index} was not closed by the client: finished=${record.finished} closedByStub=${record.closedByStub}`);
        },
        { what: `the client to close request #${index}`, ...waitOptions },
      ),
    reset() {
      requests = [];
      rules = [];
      operations = new Map();
      stub.videoPendingPolls = options.videoPendingPolls ?? 1;
      stub.chunkIntervalMs = options.chunkIntervalMs ?? 0;
      changed();
    },
    async close() {
      for (const { record } of open) record.closedByStub = true;
      shutdown.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
  return stub;
}
