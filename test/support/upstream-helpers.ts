import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { createParser } from "eventsource-parser";
import { balanceOf, eventually, pico, type TestService } from "./harness.js";
import type { UsageMetadata, VendorPathKind, VendorRequestRecord, VendorStub } from "./vendor-stub.js";

/** One entry of a ROUTES_FILE, in the operator's snake_case format (docs/api.md, "The vendor's API as the upstream"). */
export interface RouteEntry {
  name: string;
  base_url: string;
  api_key: string;
  weight?: number;
  timeout_ms?: number;
  max_input_images?: number;
  models?: string[];
}

/** Writes a route table to a fresh temp file; `remove` deletes it. */
export async function writeRoutesFile(routes: RouteEntry[]): Promise<{ path: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "routes-file-"));
  const path = join(dir, "routes.json");
  await writeFile(path, JSON.stringify({ routes }, null, 2));
  return { path, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** An http origin on a loopback port that was just released, so connecting to it is refused. */
export async function refusedOrigin(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** Published per-1M token prices of one model (decimal strings, as in the price table). */
export interface TokenPrices {
  readonly input: string;
  readonly output: string;
  /** Multimodal real-time model only. */
  readonly videoOutput?: string;
}

/** price per 1M × tokens in exact picodollars. */
export function perMillion(pricePerMillion: string, tokens: number): bigint {
  const product = pico(pricePerMillion) * BigInt(tokens);
  assert.equal(product % 1_000_000n, 0n, "test prices must be exact at picodollar precision");
  return product / 1_000_000n;
}

const modality = (details: UsageMetadata["candidatesTokensDetails"], name: string) =>
  (details ?? []).filter((d) => d.modality === name).reduce((sum, d) => sum + d.tokenCount, 0);

/**
 * What docs/api.md ("The vendor's API as the upstream") says an upstream usage report costs: prompt tokens at the
 * input price, output (candidates plus thinking) at the output price, and the
 * VIDEO share of the candidates at the video-output price when there is one.
 */
export function chargeFor(prices: TokenPrices, usage: UsageMetadata): bigint {
  const output = (usage.candidatesTokenCount ?? 0) + (usage.thoughtsTokenCount ?? 0);
  const video = prices.videoOutput === undefined ? 0 : modality(usage.candidatesTokensDetails, "VIDEO");
  return (
    perMillion(prices.input, usage.promptTokenCount) +
    perMillion(prices.output, output - video) +
    (prices.videoOutput === undefined ? 0n : perMillion(prices.videoOutput, video))
  );
}

export const videoTokensOf = (usage: UsageMetadata | undefined) => modality(usage?.candidatesTokensDetails, "VIDEO");
export const textTokensOf = (usage: UsageMetadata | undefined) => modality(usage?.candidatesTokensDetails, "TEXT");

/** The stub's requests that arrived after `mark` (a length of `stub.requests` read earlier), optionally narrowed. */
export function requestsSince(
  stub: VendorStub,
  mark: number,
  filter: { model?: string; kind?: VendorPathKind } = {},
): VendorRequestRecord[] {
  return stub.requests
    .slice(mark)
    .filter((r) => (filter.model === undefined || r.model === filter.model) && (filter.kind === undefined || r.kind === filter.kind));
}

/** Exactly one matching request arrived since `mark`; returns it. */
export function onlyRequest(stub: VendorStub, mark: number, filter: { model?: string; kind?: VendorPathKind } = {}) {
  const found = requestsSince(stub, mark, filter);
  assert.equal(found.length, 1, `expected one ${filter.kind ?? ""} request for ${filter.model ?? "any model"}; saw ${seenBy(stub, mark)}`);
  return found[0]!;
}

/** A readable list of what the stub saw, for assertion messages. */
export function seenBy(stub: VendorStub, mark = 0): string {
  const seen = stub.requests.slice(mark).map((r) => `${r.kind}:${r.model ?? ""} status=${r.status} chunks=${r.chunksSent}`);
  return `[${seen.join("; ")}]`;
}

/** Waits until nothing is held any more and returns what the balance lost since `start`. */
export async function settledCharge(service: TestService, apiKey: string, start = "10.00"): Promise<bigint> {
  const now = await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", {
    what: "the reservation to be settled or released",
  });
  assert.equal(pico(now.available), pico(now.balance), "available == balance once nothing is reserved");
  return pico(start) - pico(now.balance);
}

/** Parts of the first content of a generateContent-shaped body. */
export function userParts(body: unknown): { text?: string; inlineData?: { mimeType?: string; data?: string } }[] {
  const contents = (body as { contents?: { parts?: unknown[] }[] })?.contents ?? [];
  return (contents[0]?.parts ?? []) as { text?: string; inlineData?: { mimeType?: string; data?: string } }[];
}

/** A chunk's answer text (thought parts excluded), as a client would join it. */
export function answerText(chunk: unknown): string {
  const parts = (chunk as { candidates?: { content?: { parts?: { text?: string; thought?: boolean }[] } }[] })?.candidates?.[0]?.content?.parts ?? [];
  return parts.filter((p) => !p.thought).map((p) => p.text ?? "").join("");
}

/** Every `data:` event of a complete SSE body, parsed as JSON. */
export function sseEvents(body: string): any[] {
  const events: any[] = [];
  const parser = createParser({ onEvent: (event) => events.push(JSON.parse(event.data)) });
  parser.feed(body);
  return events;
}

/**
 * A full garbage collection in this process (which is also the service's:
 * the harness runs it in-process). A long-lived service collects garbage all
 * the time; tests that wait on a timer inside the service call this so that
 * a timer that only survives while nothing is collected fails every time,
 * not once in a while.
 */
export function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();
}
