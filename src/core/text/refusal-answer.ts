import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GenerateContentResponseSchema } from "../../../gen/generation/v1/text_service_pb.js";
import { ProviderError } from "../../ports/provider.js";

/**
 * The vendor's 200 answer to a refusal (a blocked prompt: no candidates and
 * promptFeedback; withheld output: a candidate with only its finish reason),
 * or undefined when `error` is no refusal. It costs nothing, so it reports no tokens.
 */
export function refusalAnswer(error: unknown, model: string, responseId: string): MessageInitShape<typeof GenerateContentResponseSchema> | undefined {
  if (!(error instanceof ProviderError) || (error.code !== "prompt_blocked" && error.code !== "output_blocked")) return undefined;
  const blocked = error.code === "prompt_blocked";
  return {
    promptFeedback: blocked ? { blockReason: error.reason ?? "SAFETY" } : undefined,
    candidates: blocked ? [] : [{ finishReason: error.reason ?? "SAFETY", index: 0 }],
    usageMetadata: { promptTokenCount: 0, candidatesTokenCount: 0, totalTokenCount: 0 },
    modelVersion: model,
    responseId,
  };
}
