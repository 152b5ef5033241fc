import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { toJson } from "@bufbuild/protobuf";
import {
  FunctionCallSchema, FunctionResponseSchema, GenerateContentRequestSchema, TextService, type Content, type GenerateContentRequest,
  type CountTokensRequest, type GenerateContentResponseSchema, type Part,
} from "../../../gen/generation/v1/text_service_pb.js";
import { randomUUID } from "node:crypto";
import { validateTextRequest, type TextPartInput, type TextSpec } from "../../domain/validation/text-request.js";
import { IMAGE_HEAD_BYTES } from "../../domain/text/media-tokens.js";
import { requestPromptExtras, upstreamTextBody } from "../../domain/text/upstream-body.js";
import { declaresBuiltInTool } from "../../domain/text/function-tools.js";
import { promptCount } from "../../domain/text/prompt-count.js";
import { describeTextModel, findTextModel, MODEL_NAME_PREFIX, textModelPage } from "../../domain/catalog/text-models.js";
import { DomainError, invalid } from "../../domain/errors/domain-error.js";
import { ProviderError, type AnswerPart, type TextChunk } from "../../ports/provider.js";
import { authenticate, requireGrant } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { toConnectError, toRpcError } from "../errors/rpc-errors.js";
import { requireAvailable } from "../jobs/availability.js";
import { TextCall } from "../text/text-call.js";
import { generateImageContent, streamImageContent } from "../text/image-answer.js";
import { isImageModelId } from "../../domain/validation/image-content-request.js";
import { refusalAnswer } from "../text/refusal-answer.js";
import { reportUpstreamTime } from "../text/upstream-time.js";
import { timedWaits } from "../../shared/stream-step.js";
import { imageLinkPorts, inlineCallLinks } from "../text/image-links.js";

type ResponseInit = MessageInitShape<typeof GenerateContentResponseSchema>;

/** The vendor's usage: thinking apart from the candidates' tokens, and in the total. */
function usageMetadata(chunk: TextChunk) {
  const thoughts = chunk.usage.thoughtTokens ?? 0;
  const text = chunk.usage.textOutputTokens - thoughts;
  const output = text + chunk.usage.videoOutputTokens;
  const details = [{ modality: "TEXT", tokenCount: text }];
  if (chunk.usage.videoOutputTokens > 0) details.push({ modality: "VIDEO", tokenCount: chunk.usage.videoOutputTokens });
  return {
    promptTokenCount: chunk.usage.promptTokens,
    candidatesTokenCount: output,
    totalTokenCount: chunk.usage.promptTokens + output + thoughts,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: chunk.usage.promptTokens }],
    candidatesTokensDetails: details,
    thoughtsTokenCount: thoughts > 0 ? thoughts : undefined,
  };
}

/** An answer part as the vendor's Part. */
function partMessage(part: AnswerPart) {
  const signature = part.thoughtSignature ? { thoughtSignature: part.thoughtSignature } : {};
  if (part.kind === "function_call") {
    const { id = "", name, args } = part.call;
    return { data: { case: "functionCall" as const, value: { id, name, args: args as JsonObject } }, ...signature };
  }
  return { data: { case: "text" as const, value: part.text }, thought: part.thought ?? false, ...signature };
}

/** The provider's chunks; the time waited for them so far is reported in the call's header and trailers (Server-Timing's upstream). */
function timedChunks(chunks: AsyncIterable<TextChunk>, context: HandlerContext): AsyncIterable<TextChunk> {
  let waited = 0;
  return timedWaits(chunks, (ms) => reportUpstreamTime(context, (waited += ms)));
}

function chunkResponse(spec: TextSpec, responseId: string, chunk: TextChunk): ResponseInit {
  return {
    candidates: [
      {
        content: { role: "model", parts: chunk.parts ? chunk.parts.map(partMessage) : [{ data: { case: "text", value: chunk.text } }] },
        finishReason: chunk.finishReason ?? "",
        index: 0,
      },
    ],
    usageMetadata: usageMetadata(chunk),
    modelVersion: spec.model.id,
    responseId,
  };
}

/**
 * A part as validation and the reservation read it: its text (a function call or response: its JSON, which the
 * upstream reads as prompt), or its inline data's type, size and first bytes.
 */
function partInput(part: Part): TextPartInput {
  if (part.data.case === "text") return { text: part.data.value };
  if (part.data.case === "functionCall") return { text: JSON.stringify(toJson(FunctionCallSchema, part.data.value)) };
  if (part.data.case === "functionResponse") return { text: JSON.stringify(toJson(FunctionResponseSchema, part.data.value)) };
  if (part.data.case !== "inlineData") return {};
  const { mimeType, data } = part.data.value;
  return { hasInlineData: true, inlineData: { mimeType, bytes: data.length, head: data.subarray(0, IMAGE_HEAD_BYTES) } };
}

/** A request's contents as validation reads them. */
function textRequestInput(
  model: string,
  contents: readonly Content[],
  systemInstruction: Content | undefined,
  generationConfig?: GenerateContentRequest["generationConfig"],
) {
  return {
    model,
    contents: contents.map((content) => ({ role: content.role, parts: content.parts.map(partInput) })),
    systemInstruction: systemInstruction && { parts: systemInstruction.parts.map(partInput) },
    maxOutputTokens: generationConfig?.maxOutputTokens,
    candidateCount: generationConfig?.candidateCount,
  };
}

function upstreamFailureOf(error: unknown): unknown {
  if (error instanceof ProviderError) return new DomainError("upstream_failure", error.code, `the provider failed: ${error.message}`);
  return error;
}

/** CountTokens: the prompt GenerateContent would reserve for, counted by the same rules; nothing is held. */
async function countTextTokens(deps: CoreDeps, request: CountTokensRequest, context: HandlerContext) {
  const caller = await authenticate(context.requestHeader, deps);
  const whole = request.generateContentRequest;
  // Linked images are counted as the images they are, so they are fetched as GenerateContent fetches them.
  const linked = { model: request.model, contents: whole ? whole.contents : request.contents, systemInstruction: whole?.systemInstruction };
  await inlineCallLinks(imageLinkPorts(deps), caller, linked, context.signal);
  const named = whole?.model.startsWith(MODEL_NAME_PREFIX) ? whole.model.slice(MODEL_NAME_PREFIX.length) : whole?.model;
  if (named && named !== request.model) {
    throw invalid("model_mismatch", `generateContentRequest.model names ${named}, the path ${request.model}`, {
      field: "generateContentRequest.model",
    });
  }
  // Refused as GenerateContent would refuse it (unknown model, empty contents, unsupported media, …): nothing is held.
  const spec = validateTextRequest(
    whole
      ? textRequestInput(request.model, whole.contents, whole.systemInstruction, whole.generationConfig)
      : textRequestInput(request.model, request.contents, undefined),
    deps.settingsOf.limits,
  );
  requireGrant(caller, spec.model);
  const count = promptCount(spec, whole ? wholeRequestExtras(whole) : 0);
  return { totalTokens: count.totalTokens, promptTokensDetails: count.details.map((d) => ({ ...d })) };
}

export function createTextService(deps: CoreDeps): ServiceImpl<typeof TextService> {
  async function open(request: GenerateContentRequest, context: HandlerContext) {
    const caller = await authenticate(context.requestHeader, deps);
    await inlineCallLinks(imageLinkPorts(deps), caller, request, context.signal);
    const spec = validateTextRequest(
      textRequestInput(request.model, request.contents, request.systemInstruction, request.generationConfig),
      deps.settingsOf.limits,
    );
    requireGrant(caller, spec.model);
    await requireAvailable(deps.settings, spec.model, deps.settingsOf.retryAfterSeconds);
    // Only the allow-listed fields go upstream (400 for the rest), before any money is held;
    // generationConfig.maxOutputTokens is set to the bound the reservation assumes.
    const { model: _model, ...asked } = toJson(GenerateContentRequestSchema, request) as Record<string, unknown>;
    // Built-in tools pass only when priced: their prices are read (from the store, so a change is in force at once) when one is named.
    const toolPrices = declaresBuiltInTool(asked.tools) ? await deps.settings.toolPrices() : undefined;
    const { body: wire, extraPromptTokens, thinkingTokens, toolFee } = upstreamTextBody(
      asked, spec.model, spec.maxOutputTokens, deps.settingsOf.limits, deps.settingsOf.safetyMinimums, toolPrices,
    );
    const plan = await deps.provider.planRoute(spec.model);
    const call = await TextCall.open(deps, caller, spec, { extraPromptTokens, thinkingTokens, toolFee });
    const inputImages = request.contents.flatMap((c) =>
      c.parts.flatMap((p) => (p.data.case === "inlineData" ? [{ mimeType: p.data.value.mimeType, bytes: p.data.value.data }] : [])),
    );
    const maxOutputTokens = spec.maxOutputTokens + thinkingTokens;
    const upstream = { model: spec.model, route: plan.route, promptText: spec.promptText, extraPromptTokens, maxOutputTokens, inputImages, wire };
    return { spec, call, upstream };
  }

  return {
    countTokens: (request, context) => countTextTokens(deps, request, context),

    listTextModels: async (request, context) => {
      await authenticate(context.requestHeader, deps);
      const page = textModelPage(request.pageSize, request.pageToken);
      return {
        models: page.models.map((model) => textModelMessage(model, deps)),
        nextPageToken: page.nextPageToken,
      };
    },

    getTextModel: async (request, context) => {
      await authenticate(context.requestHeader, deps);
      return { model: textModelMessage(findTextModel(request.name), deps) };
    },

    generateContent: async (request, context) => {
      if (isImageModelId(request.model)) return generateImageContent(deps, request, context);
      const { spec, call, upstream } = await open(request, context);
      const responseId = randomUUID();
      // One upstream call: the answer is produced whole, then charged (a caller gone before it is charged nothing).
      const started = performance.now();
      let answer: TextChunk;
      try {
        answer = await deps.provider.generateText(upstream, context.signal);
      } catch (error) {
        await call.end();
        const refusal = refusalAnswer(error, spec.model.id, responseId);
        if (refusal) return refusal;
        // A ConnectError: the provider's time waited leaves with it (its metadata).
        throw toRpcError(upstreamFailureOf(error));
      } finally {
        reportUpstreamTime(context, performance.now() - started);
      }
      call.markDelivered(answer);
      await call.end();
      return chunkResponse(spec, responseId, answer);
    },

    async *streamGenerateContent(request, context) {
      if (request.request && isImageModelId(request.request.model)) return yield* streamImageContent(deps, request.request, context);
      // Errors before the first chunk travel as RPC errors (HTTP errors on REST).
      let opened: Awaited<ReturnType<typeof open>>;
      try {
        opened = await open(request.request ?? ({ model: "", contents: [] } as unknown as GenerateContentRequest), context);
      } catch (error) {
        throw toRpcError(error);
      }
      const { spec, call, upstream } = opened;
      const chunks = timedChunks(deps.provider.streamText(upstream, context.signal), context);
      const responseId = randomUUID();
      try {
        for await (const chunk of chunks) {
          // Produced output is owed once it leaves for the caller, even if the caller then hangs up.
          call.markDelivered(chunk);
          yield { chunk: chunkResponse(spec, responseId, chunk) };
        }
      } catch (error) {
        const refusal = refusalAnswer(error, spec.model.id, responseId);
        if (refusal) {
          await call.end();
          yield { chunk: refusal };
          return;
        }
        await call.end();
        if (error instanceof ProviderError) throw toConnectError(new DomainError("upstream_failure", error.code, error.message));
        throw toRpcError(error);
      } finally {
        await call.end();
      }
    },
  };
}

/** Prompt tokens of a whole request beyond its contents: its declarations and response schema, as GenerateContent reserves them. */
function wholeRequestExtras(request: GenerateContentRequest): number {
  return requestPromptExtras(toJson(GenerateContentRequestSchema, request) as Record<string, unknown>);
}

function textModelMessage(model: Parameters<typeof describeTextModel>[0], deps: CoreDeps) {
  const view = describeTextModel(model, deps.settingsOf.limits);
  return { ...view, supportedGenerationMethods: [...view.supportedGenerationMethods] };
}
