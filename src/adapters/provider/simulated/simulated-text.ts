import { createHash } from "node:crypto";
import { countTokens } from "../../../domain/text/tokens.js";

const WORDS = [
  "light", "river", "signal", "quiet", "engine", "amber", "window", "orbit", "paper", "harbor",
  "cedar", "velvet", "copper", "meadow", "lantern", "glacier", "violet", "thunder", "pixel", "canyon",
];

/**
 * The simulated answer: a fixed preamble, the prompt quoted back, then three
 * sentences whose words are picked by a hash of the prompt. Same prompt, same
 * answer; different prompts, different answers.
 */
export function simulatedAnswer(model: string, prompt: string): string {
  const digest = createHash("sha256").update(prompt).digest();
  const sentences: string[] = [];
  for (let s = 0; s < 3; s++) {
    const words = Array.from({ length: 6 }, (_, w) => WORDS[digest[(s * 6 + w) % digest.length]! % WORDS.length]!);
    sentences.push(`${words[0]![0]!.toUpperCase()}${words[0]!.slice(1)} ${words.slice(1).join(" ")}.`);
  }
  const quoted = prompt.length > 200 ? `${prompt.slice(0, 200)}…` : prompt;
  return `Simulated answer from ${model}. You asked: "${quoted}". ${sentences.join(" ")}`;
}

/** Cuts the answer to the token budget; the rule of countTokens makes this a byte bound. */
export function truncateToTokens(text: string, maxTokens: number): { text: string; truncated: boolean } {
  if (countTokens(text) <= maxTokens) return { text, truncated: false };
  let bytes = Buffer.from(text, "utf8").subarray(0, maxTokens * 4).toString("utf8");
  // A cut inside a multi-byte character leaves a replacement char; drop it.
  bytes = bytes.replace(/\uFFFD+$/, "");
  return { text: bytes, truncated: true };
}

/** Splits an answer into stream chunks of about five words (at least three chunks for any answer). */
export function chunkAnswer(text: string): string[] {
  const pieces = text.match(/\S+\s*/g) ?? [text];
  const chunks: string[] = [];
  for (let i = 0; i < pieces.length; i += 5) chunks.push(pieces.slice(i, i + 5).join(""));
  return chunks;
}
