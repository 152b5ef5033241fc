import { createHash } from "node:crypto";
import { countTokens } from "../../../domain/text/tokens.js";
import type { FunctionCallPart } from "../../../ports/provider.js";
import { schemaInstance } from "./schema-instance.js";

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

/** The simulated reasoning shown before an answer when thinking is asked: deterministic, a few dozen tokens. */
export function simulatedThought(prompt: string): string {
  const digest = createHash("sha256").update(`thought\n${prompt}`).digest();
  const words = Array.from({ length: 8 }, (_, w) => WORDS[digest[w]! % WORDS.length]!);
  const quoted = prompt.length > 80 ? `${prompt.slice(0, 80)}…` : prompt;
  return `Thinking about "${quoted}": weighing ${words.slice(0, 4).join(", ")} against ${words.slice(4).join(", ")} before answering.`;
}

/** Thinking the simulator does when a budget names none (a thinkingLevel, or -1): a fixed amount, at most this. */
const DYNAMIC_THINKING_TOKENS = 64;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);

export interface SimulatedWire {
  /** Thinking asked for: the most tokens it may take, and whether the thought is shown. */
  readonly thinking?: { readonly budget: number; readonly include: boolean };
  /** The schema of a JSON answer (responseJsonSchema or responseSchema with responseMimeType application/json). */
  readonly jsonSchema?: unknown;
  /** The call asked for when the last turn holds `marker` and functions are declared (and not switched off). */
  functionCall(marker: string): FunctionCallPart | undefined;
}

/** What the simulator reads of a request's vendor JSON (a job's request has none). */
export function wireOf(wire: Json | undefined): SimulatedWire {
  const config = isObject(wire?.generationConfig) ? wire.generationConfig : {};
  const thinkingConfig = isObject(config.thinkingConfig) ? config.thinkingConfig : undefined;
  const budget = thinkingConfig?.thinkingLevel !== undefined || thinkingConfig?.thinkingBudget === -1
    ? DYNAMIC_THINKING_TOKENS
    : typeof thinkingConfig?.thinkingBudget === "number" ? thinkingConfig.thinkingBudget : 0;
  const schema = config.responseJsonSchema ?? config.responseSchema;
  return {
    thinking: budget > 0 ? { budget, include: thinkingConfig?.includeThoughts === true } : undefined,
    jsonSchema: config.responseMimeType === "application/json" ? schema : undefined,
    functionCall: (marker) => functionCallOf(wire, marker),
  };
}

function functionCallOf(wire: Json | undefined, marker: string): FunctionCallPart | undefined {
  const contents = Array.isArray(wire?.contents) ? (wire.contents as Json[]) : [];
  const last = contents[contents.length - 1];
  const parts = Array.isArray(last?.parts) ? (last.parts as Json[]) : [];
  if (last?.role === "model" || !parts.some((p) => typeof p.text === "string" && p.text.includes(marker))) return undefined;
  const calling = isObject(wire?.toolConfig) && isObject(wire.toolConfig.functionCallingConfig) ? wire.toolConfig.functionCallingConfig : {};
  if (calling.mode === "NONE") return undefined;
  const allowed = Array.isArray(calling.allowedFunctionNames) ? (calling.allowedFunctionNames as string[]) : [];
  const tools = Array.isArray(wire?.tools) ? (wire.tools as Json[]) : [];
  const declarations = tools.flatMap((tool) => (Array.isArray(tool.functionDeclarations) ? (tool.functionDeclarations as Json[]) : []));
  const chosen = declarations.find((d) => allowed.length === 0 || allowed.includes(d.name as string));
  if (!chosen) return undefined;
  const name = chosen.name as string;
  const args = schemaInstance(chosen.parametersJsonSchema ?? chosen.parameters ?? { type: "object" });
  const id = `call_${createHash("sha256").update(`${name}\n${JSON.stringify(last)}`).digest("hex").slice(0, 16)}`;
  return { id, name, args: isObject(args) ? args : {} };
}
