import { badParam } from "./chat-request.js";

/**
 * OpenAI's image generation request as jobs of the jobs API: one job per
 * image, each reserved and charged at the model's per-image price.
 */

type Json = Record<string, unknown>;

export interface ImagesCall {
  readonly model: string;
  readonly prompt: string;
  readonly n: number;
  readonly aspectRatio?: string;
  readonly resolution?: string;
  readonly responseFormat: "url" | "b64_json";
}

/** Most images one request makes (each its own job). */
export const MAX_IMAGES = 4;

/** OpenAI's parameters that change nothing here: accepted and ignored. */
const IGNORED = new Set(["user", "quality", "style", "moderation", "output_compression", "background", "output_format"]);
const KNOWN = new Set(["model", "prompt", "n", "size", "response_format"]);

const isSet = (value: unknown) => value !== undefined && value !== null;
const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** `WxH` (its ratio, and the resolution whose long side covers it) or an aspect ratio `W:H`; `auto` or unset: the model's default. */
function sizeOf(size: unknown): { aspectRatio?: string; resolution?: string } {
  if (!isSet(size) || size === "auto") return {};
  const pixels = typeof size === "string" ? /^(\d{1,5})x(\d{1,5})$/.exec(size) : null;
  if (pixels) {
    const [width, height] = [Number(pixels[1]), Number(pixels[2])];
    if (width === 0 || height === 0) throw badParam("size", "size must be WIDTHxHEIGHT with both above 0");
    const divisor = gcd(width, height);
    const long = Math.max(width, height);
    return { aspectRatio: `${width / divisor}:${height / divisor}`, resolution: long <= 1024 ? "1K" : long <= 2048 ? "2K" : "4K" };
  }
  if (typeof size === "string" && /^\d{1,2}:\d{1,2}$/.test(size)) return { aspectRatio: size };
  throw badParam("size", 'size must be "auto", WIDTHxHEIGHT (e.g. "1536x1024") or an aspect ratio (e.g. "16:9")');
}

export function imagesToJobs(body: unknown): ImagesCall {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw badParam("", "the request body must be a JSON object");
  const request = body as Json;
  for (const name of Object.keys(request)) {
    if (!KNOWN.has(name) && !IGNORED.has(name)) throw badParam(name, `Unrecognized request argument supplied: ${name}`, "unknown_parameter");
  }
  if (typeof request.model !== "string" || request.model === "") throw badParam("model", "model must be an image model id");
  if (typeof request.prompt !== "string" || request.prompt === "") throw badParam("prompt", "prompt must be a non-empty string");
  const n = isSet(request.n) ? request.n : 1;
  if (!(Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_IMAGES)) throw badParam("n", `n must be from 1 to ${MAX_IMAGES}`);
  const format = isSet(request.response_format) ? request.response_format : "url";
  if (format !== "url" && format !== "b64_json") throw badParam("response_format", 'response_format must be "url" or "b64_json"');
  return { model: request.model, prompt: request.prompt, n: n as number, ...sizeOf(request.size), responseFormat: format };
}
