import assert from "node:assert/strict";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { pico, type ApiResponse } from "./harness.js";

export const VENDOR = "/api/aimodel/v1beta";

/** The service's documented token rule, computed independently of its code: one token per started 4 UTF-8 bytes. */
export const tokensOf = (text: string) => Math.ceil(Buffer.byteLength(text, "utf8") / 4);

/** A one-turn vendor request body. */
export const userTurn = (text: string, extra: Record<string, unknown> = {}) => ({
  contents: [{ role: "user", parts: [{ text }] }],
  ...extra,
});

/** price per 1M tokens × tokens, in exact picodollars. */
export function perMillion(pricePerMillion: string, tokens: number): bigint {
  const product = pico(pricePerMillion) * BigInt(tokens);
  assert.equal(product % 1_000_000n, 0n, "test prices must be exact at picodollar precision");
  return product / 1_000_000n;
}

export const tokenCharge = (prices: { input: string; output: string }, promptTokens: number, outputTokens: number) =>
  perMillion(prices.input, promptTokens) + perMillion(prices.output, outputTokens);

/** Asserts the vendor's error shape `{error: {code: <http>, message, status, details}}` with the given HTTP status. */
export function assertVendorError(response: ApiResponse, httpStatus: number, canonical: string) {
  assert.equal(response.status, httpStatus, response.text);
  assert.ok(response.json?.error, `expected a vendor error body, got ${response.text}`);
  const error = response.json.error;
  assert.equal(error.code, httpStatus);
  assert.equal(error.status, canonical);
  assert.equal(typeof error.message, "string");
  assert.ok(error.message.length > 0);
  assert.ok(Array.isArray(error.details), "error.details is an array");
  const info = error.details.find((d: { "@type"?: string }) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo");
  assert.ok(info, `an ErrorInfo detail in ${JSON.stringify(error.details)}`);
  assert.match(info.reason, /^[A-Z][A-Z0-9_]*$/);
  return error as { code: number; status: string; message: string; details: { reason: string }[] };
}

export interface StreamChunk {
  candidates?: { content?: { role?: string; parts?: { text?: string }[] }; finishReason?: string }[];
  usageMetadata?: { promptTokenCount?: number; candidatesTokenCount?: number; totalTokenCount?: number };
  promptFeedback?: { blockReason?: string };
  error?: unknown;
}

export const chunkText = (chunk: StreamChunk) =>
  (chunk.candidates?.[0]?.content?.parts ?? []).map((p) => p.text ?? "").join("");

/**
 * Reads an SSE body the way an SDK does: bytes → text → eventsource-parser
 * events → JSON. `onChunk` sees each chunk as it arrives and may stop
 * reading by returning "stop".
 */
export async function readSse(
  response: Response,
  onChunk: (chunk: StreamChunk, event: EventSourceMessage) => "stop" | void = () => {},
): Promise<{ chunks: StreamChunk[]; events: EventSourceMessage[]; stopped: boolean }> {
  const chunks: StreamChunk[] = [];
  const events: EventSourceMessage[] = [];
  let stopped = false;
  const parser = createParser({
    onEvent(event) {
      events.push(event);
      const chunk = JSON.parse(event.data) as StreamChunk;
      chunks.push(chunk);
      if (onChunk(chunk, event) === "stop") stopped = true;
    },
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  while (!stopped) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true }));
  }
  if (stopped) await reader.cancel().catch(() => {});
  return { chunks, events, stopped };
}

/** POSTs a streamGenerateContent?alt=sse request with the vendor key header. */
export function streamRequest(
  service: { url: string },
  model: string,
  body: unknown,
  { key, signal }: { key?: string; signal?: AbortSignal } = {},
) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key) headers["x-vendor-api-key"] = key;
  return fetch(`${service.url}${VENDOR}/models/${model}:streamGenerateContent?alt=sse`, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
    signal,
  });
}
