import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import type { GenerateContentRequest, GenerateContentResponseSchema, Part, PartSchema } from "../../../gen/generation/v1/text_service_pb.js";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { Money } from "../../domain/money.js";
import { imagePrice, type TokenUsage } from "../../domain/pricing/quotes.js";
import {
  validateImageContentRequest, type ImageContentPart, type ImageContentSpec,
} from "../../domain/validation/image-content-request.js";
import { ProviderError, type GenerationOutput, type InputImage, type MediaRequest } from "../../ports/provider.js";
import { authenticate, requireGrant, type Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { toRpcError } from "../errors/rpc-errors.js";
import { requireAvailable } from "../jobs/availability.js";
import { endCallHold, newTextCallIntentId, refusalError, takeHold } from "../money/holds.js";
import { refusalAnswer } from "./refusal-answer.js";
import { reportUpstreamTime } from "./upstream-time.js";
import { imageLinkPorts, inlineCallLinks } from "./image-links.js";

type ResponseInit = MessageInitShape<typeof GenerateContentResponseSchema>;

/** A part as the image rules read it. */
function partInput(part: Part): ImageContentPart {
  switch (part.data.case) {
    case "text":
      return { text: part.data.value };
    case "inlineData":
      return { inlineData: { mimeType: part.data.value.mimeType, bytes: part.data.value.data.length } };
    case "functionCall":
    case "functionResponse":
      return { other: part.data.case };
    default:
      return {};
  }
}

/** The request's fields that are set, by their vendor names: the rules refuse those an image answer cannot honour. */
function fieldsSet(request: GenerateContentRequest): string[] {
  const config = request.generationConfig;
  const set: [string, boolean][] = [
    ["tools", request.tools.length > 0],
    ["toolConfig", request.toolConfig !== undefined],
    ["safetySettings", request.safetySettings.length > 0],
    ["cachedContent", request.cachedContent !== ""],
    ["generationConfig.responseSchema", config?.responseSchema !== undefined],
    ["generationConfig.responseJsonSchema", config?.responseJsonSchema !== undefined],
    ["generationConfig.responseMimeType", (config?.responseMimeType ?? "") !== "" && config?.responseMimeType !== "text/plain"],
  ];
  return set.filter(([, isSet]) => isSet).map(([name]) => name);
}

/**
 * One image call's money, as a text call's (src/core/text/text-call.ts): the
 * per-image price is held when the call is accepted, under a text call's
 * intent id (so the reaper's TEXT_CALL_LIMIT rule covers it), and the hold
 * ends once: charged that price when the answer was delivered, released when not.
 */
class ImageHold {
  private ended = false;

  private constructor(
    private readonly deps: CoreDeps,
    private readonly accountId: string,
    private readonly intentId: string,
    readonly price: Money,
  ) {}

  static async open(deps: CoreDeps, caller: Caller, spec: ImageContentSpec): Promise<ImageHold> {
    const price = imagePrice(spec.model.id, (await deps.settings.prices()).get(spec.model.id), spec.resolution);
    const intentId = newTextCallIntentId();
    const outcome = await takeHold(deps, caller.accountId, intentId, price, deps.clock.now(), { model: spec.model.id, keyId: caller.keyId }, {
      key: { keyId: caller.keyId, limits: caller.limits, isJob: false },
    });
    if (outcome !== "reserved") throw refusalError(outcome, price);
    return new ImageHold(deps, caller.accountId, intentId, price);
  }

  /** Charges the image's price (the statement records the provider's token counts beside it), or releases when `usage` is undefined. */
  async end(usage: TokenUsage | undefined): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await endCallHold(this.deps, this.accountId, this.intentId, usage && { amount: this.price, usage }, "nothing_delivered");
  }
}

/** Everything checked and the price held: what remains is the provider's call. */
async function accept(deps: CoreDeps, request: GenerateContentRequest, context: HandlerContext) {
  const caller = await authenticate(context.requestHeader, deps);
  await inlineCallLinks(imageLinkPorts(deps), caller, request, context.signal);
  const config = request.generationConfig;
  const input = {
    model: request.model,
    contents: request.contents.map((content) => ({ parts: content.parts.map(partInput) })),
    systemInstruction: request.systemInstruction && { parts: request.systemInstruction.parts.map(partInput) },
    responseModalities: config?.responseModalities ?? [],
    aspectRatio: config?.imageConfig?.aspectRatio,
    imageSize: config?.imageConfig?.imageSize,
    candidateCount: config?.candidateCount,
    fieldsSet: fieldsSet(request),
  };
  const limits = deps.settingsOf.limits;
  // The request is checked against the job limits first, then against the input-image limit of the route it is given.
  const first = validateImageContentRequest(input, limits);
  requireGrant(caller, first.model);
  await requireAvailable(deps.settings, first.model, deps.settingsOf.retryAfterSeconds);
  const plan = await deps.provider.planRoute(first.model);
  const spec = validateImageContentRequest(input, { ...limits, maxInputImages: plan.maxInputImages });
  const hold = await ImageHold.open(deps, caller, spec);
  const inputImages: InputImage[] = [...(request.systemInstruction ? [request.systemInstruction] : []), ...request.contents].flatMap((content) =>
    content.parts.flatMap((p) => (p.data.case === "inlineData" ? [{ mimeType: p.data.value.mimeType, bytes: p.data.value.data }] : [])),
  );
  const upstream: MediaRequest = {
    model: spec.model, route: plan.route, prompt: spec.prompt, aspectRatio: spec.aspectRatio, resolution: spec.resolution, inputImages,
  };
  return { spec, hold, upstream };
}

/** The answer's parts as the vendor orders them: its text (when asked for), then the image. */
function answerParts(spec: ImageContentSpec, output: GenerationOutput): MessageInitShape<typeof PartSchema>[] {
  const out: MessageInitShape<typeof PartSchema>[] = [];
  if (spec.wantsText && output.text) out.push({ data: { case: "text", value: output.text } });
  if (output.media) out.push({ data: { case: "inlineData", value: { mimeType: output.media.mimeType, data: output.media.bytes } } });
  return out;
}

/**
 * The provider's token counts, as it reported them (the vendor counts an
 * image's tokens among the candidates): the answer is charged per image,
 * and these counts are what the statement records beside the charge.
 */
function usageMetadata(usage: TokenUsage) {
  const output = usage.textOutputTokens + usage.videoOutputTokens;
  return {
    promptTokenCount: usage.promptTokens,
    candidatesTokenCount: output,
    totalTokenCount: usage.promptTokens + output,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: usage.promptTokens }],
  };
}

/**
 * Makes the image and builds the whole answer (a stream sends it as its one
 * chunk), with the usage to settle the hold by once it is delivered. A refusal is
 * the vendor's 200 answer and costs nothing; a failure releases the hold and
 * is thrown as the text calls throw it (503 UNAVAILABLE on the vendor surface).
 */
async function answer(
  deps: CoreDeps, request: GenerateContentRequest, context: HandlerContext,
): Promise<{ response: ResponseInit; hold: ImageHold; usage?: TokenUsage }> {
  const { spec, hold, upstream } = await accept(deps, request, context);
  const responseId = randomUUID();
  const started = performance.now();
  let output: GenerationOutput;
  try {
    output = await deps.provider.generateImage(upstream, context.signal);
  } catch (error) {
    await hold.end(undefined);
    const refusal = refusalAnswer(error, spec.model.id, responseId);
    if (refusal) return { response: refusal, hold };
    if (error instanceof ProviderError) throw new DomainError("upstream_failure", error.code, `the provider failed: ${error.message}`);
    throw error;
  } finally {
    reportUpstreamTime(context, performance.now() - started);
  }
  const parts = answerParts(spec, output);
  const response: ResponseInit = {
    candidates: [{ content: { role: "model", parts }, finishReason: "STOP", index: 0 }],
    usageMetadata: usageMetadata(output.usage),
    modelVersion: spec.model.id,
    responseId,
  };
  // An answer with no part (text the caller did not ask for) delivers nothing: it is released like a failure.
  return { response, hold, usage: parts.length > 0 ? output.usage : undefined };
}

/** generateContent on an image model: the image in one answer, charged its per-image price unless the caller is gone by then. */
export async function generateImageContent(deps: CoreDeps, request: GenerateContentRequest, context: HandlerContext): Promise<ResponseInit> {
  const { response, hold, usage } = await answer(deps, request, context);
  await hold.end(context.signal.aborted ? undefined : usage);
  return response;
}

/**
 * streamGenerateContent on an image model: one chunk carries the whole
 * answer (the image, its text, STOP and the usage). Errors before it are
 * RPC errors (HTTP errors on REST); it is charged once it is handed on.
 */
export async function* streamImageContent(
  deps: CoreDeps, request: GenerateContentRequest, context: HandlerContext,
): AsyncGenerator<{ chunk: ResponseInit }> {
  let answered: Awaited<ReturnType<typeof answer>>;
  try {
    answered = await answer(deps, request, context);
  } catch (error) {
    throw toRpcError(error);
  }
  const { response, hold, usage } = answered;
  try {
    // Owed once it leaves for the caller, as a text stream's chunks are.
    await hold.end(context.signal.aborted ? undefined : usage);
    yield { chunk: response };
  } finally {
    await hold.end(undefined);
  }
}
