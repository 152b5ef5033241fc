import type { TokenUsage } from "../../domain/pricing/quotes.js";
import { ProviderError, type AnswerPart } from "../../ports/provider.js";

/** The parts of the vendor's GenerateContentResponse this service reads. */
export interface VendorPart {
  text?: string;
  thought?: boolean;
  inlineData?: { mimeType?: string; data?: string };
  functionCall?: { id?: string; name?: string; args?: Record<string, unknown> };
  thoughtSignature?: string;
}

export interface VendorUsage {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  thoughtsTokenCount?: number;
  totalTokenCount?: number;
  candidatesTokensDetails?: { modality?: string; tokenCount?: number }[];
}

export interface VendorResponse {
  candidates?: { content?: { role?: string; parts?: VendorPart[] }; finishReason?: string }[];
  promptFeedback?: { blockReason?: string };
  usageMetadata?: VendorUsage;
  modelVersion?: string;
  responseId?: string;
}

/** Finish reasons that mean the output was withheld by the vendor's filters. */
const FILTERED = new Set([
  "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT",
  "IMAGE_RECITATION", "IMAGE_OTHER", "NO_IMAGE", "LANGUAGE",
]);

/**
 * Usage as billed: prompt tokens at the input price; output (candidates plus
 * thinking, which the vendor bills as output) split by modality, video output
 * at its own price.
 */
export function usageOf(usage: VendorUsage | undefined): TokenUsage {
  const promptTokens = usage?.promptTokenCount ?? 0;
  const output = (usage?.candidatesTokenCount ?? 0) + (usage?.thoughtsTokenCount ?? 0);
  const video = (usage?.candidatesTokensDetails ?? [])
    .filter((d) => d.modality === "VIDEO")
    .reduce((sum, d) => sum + (d.tokenCount ?? 0), 0);
  const thoughts = usage?.thoughtsTokenCount ?? 0;
  const textOutputTokens = Math.max(0, output - video);
  return { promptTokens, textOutputTokens, videoOutputTokens: video, ...(thoughts > 0 ? { thoughtTokens: thoughts } : {}) };
}

/**
 * The parts of a text answer (or stream chunk) as the port carries them, in
 * the upstream's order: text, thought text and function calls, each with its
 * thought signature. Undefined when the answer is plain text (its text says
 * it all), so plain answers travel as before.
 */
export function answerPartsOf(response: VendorResponse): AnswerPart[] | undefined {
  const parts = response.candidates?.[0]?.content?.parts ?? [];
  if (!parts.some((p) => p.thought || p.functionCall || p.thoughtSignature)) return undefined;
  const out: AnswerPart[] = [];
  for (const part of parts) {
    const signature = part.thoughtSignature ? { thoughtSignature: new Uint8Array(Buffer.from(part.thoughtSignature, "base64")) } : {};
    if (part.functionCall) {
      const { id, name = "", args = {} } = part.functionCall;
      out.push({ kind: "function_call", call: { ...(id ? { id } : {}), name, args }, ...signature });
    } else if (typeof part.text === "string") {
      out.push({ kind: "text", text: part.text, ...(part.thought ? { thought: true } : {}), ...signature });
    }
  }
  return out;
}

/** A refusal by the vendor's filters: the job fails with a clear code and is not charged. */
export function refusalOf(response: VendorResponse): ProviderError | undefined {
  const blockReason = response.promptFeedback?.blockReason;
  if (blockReason) return new ProviderError("prompt_blocked", `the upstream blocked the prompt (${blockReason})`, blockReason);
  const candidate = response.candidates?.[0];
  const parts = candidate?.content?.parts ?? [];
  const hasOutput = parts.some((p) => !p.thought && (p.text || p.inlineData?.data || p.functionCall));
  if (!hasOutput && candidate?.finishReason && FILTERED.has(candidate.finishReason)) {
    return new ProviderError("output_blocked", `the upstream withheld the output (${candidate.finishReason})`, candidate.finishReason);
  }
  if (!candidate && !blockReason) return new ProviderError("empty_response", "the upstream answered without candidates");
  return undefined;
}

export interface Interpreted {
  readonly text?: string;
  readonly image?: { bytes: Uint8Array; mimeType: string };
  readonly usage: TokenUsage;
  readonly finishReason?: string;
}

/**
 * Text parts joined, and the last non-thought inline image (thinking models
 * send draft images marked `thought` before the deliverable).
 */
export function interpret(response: VendorResponse): Interpreted {
  const refusal = refusalOf(response);
  if (refusal) throw refusal;
  const candidate = response.candidates![0]!;
  const parts = (candidate.content?.parts ?? []).filter((p) => !p.thought);
  const text = parts.map((p) => p.text ?? "").join("");
  const images = parts.filter((p) => p.inlineData?.data);
  const last = images[images.length - 1]?.inlineData;
  return {
    text: text.length > 0 ? text : undefined,
    image: last ? { bytes: Buffer.from(last.data!, "base64"), mimeType: last.mimeType ?? "image/png" } : undefined,
    usage: usageOf(response.usageMetadata),
    finishReason: candidate.finishReason,
  };
}

/** The text delta of one stream chunk (thought parts excluded). */
export function chunkText(response: VendorResponse): string {
  return (response.candidates?.[0]?.content?.parts ?? []).filter((p) => !p.thought).map((p) => p.text ?? "").join("");
}

/** A long-running video operation as the vendor reports it. */
export interface VendorOperation {
  name?: string;
  done?: boolean;
  error?: { code?: number; message?: string };
  response?: {
    generateVideoResponse?: {
      generatedSamples?: { video?: { uri?: string; encodedVideo?: string; bytesBase64Encoded?: string; mimeType?: string } }[];
      raiMediaFilteredCount?: number;
      raiMediaFilteredReasons?: string[];
    };
  };
}

export type VideoOutcome = { readonly uri: string } | { readonly bytes: Uint8Array };

/** The finished operation's video, or why there is none. */
export function videoOf(operation: VendorOperation): VideoOutcome {
  if (operation.error) throw new ProviderError("generation_failed", `the upstream video operation failed: ${operation.error.message ?? operation.error.code}`);
  const result = operation.response?.generateVideoResponse;
  const video = result?.generatedSamples?.[0]?.video;
  const inline = video?.encodedVideo ?? video?.bytesBase64Encoded;
  if (inline) return { bytes: Buffer.from(inline, "base64") };
  if (video?.uri) return { uri: video.uri };
  if ((result?.raiMediaFilteredCount ?? 0) > 0) {
    throw new ProviderError("output_blocked", `the upstream filtered the video (${(result?.raiMediaFilteredReasons ?? []).join("; ") || "safety"})`);
  }
  throw new ProviderError("empty_response", "the upstream video operation finished without a video");
}
