import type { Money } from "../../domain/money.js";
import { tokenCost, tokenEstimate, type TokenUsage } from "../../domain/pricing/quotes.js";
import type { TextSpec } from "../../domain/validation/text-request.js";
import type { TextChunk } from "../../ports/provider.js";
import type { Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";
import { endCallHold, newTextCallIntentId, refusalError, takeHold } from "../money/holds.js";

/** What a call holds beyond its contents' prompt and its answer's allowance. */
export interface TextCallExtras {
  /** Prompt tokens the upstream counts beyond the contents (declarations, a response schema). */
  readonly extraPromptTokens?: number;
  /** Thinking tokens reserved on top of the answer's allowance. */
  readonly thinkingTokens?: number;
  /** The per-call prices of the priced built-in tools the call declares. */
  readonly toolFee?: Money;
}

/**
 * One synchronous text call's money: the estimate is held while the answer
 * is produced; at the end the hold becomes a charge for what was actually
 * delivered. Nothing delivered, nothing charged.
 */
export class TextCall {
  private delivered?: TokenUsage;
  private ended = false;

  private constructor(
    private readonly deps: CoreDeps,
    private readonly accountId: string,
    private readonly intentId: string,
    private readonly spec: TextSpec,
    private readonly prices: Parameters<typeof tokenCost>[1],
    private readonly toolFee: Money,
  ) {}

  /**
   * Holds what the call can cost: the prompt's bound (text, inline media by
   * the vendor's rules, and `extraPromptTokens` the upstream counts beyond the
   * contents, such as function declarations or a response schema) at the input price, plus
   * spec.maxOutputTokens and the `thinkingTokens` reserved (the upstream is held to their sum) at the dearest output price,
   * plus `toolFee`, the per-call prices of the built-in tools it declares (charged with the tokens).
   */
  static async open(deps: CoreDeps, caller: Caller, spec: TextSpec, extras: TextCallExtras = {}): Promise<TextCall> {
    const { extraPromptTokens = 0, thinkingTokens = 0, toolFee = 0n } = extras;
    const prices = (await deps.settings.prices()).get(spec.model.id);
    const estimate: Money =
      tokenEstimate(spec.model.id, prices, spec.reservedPromptTokens + extraPromptTokens, spec.maxOutputTokens, thinkingTokens) + toolFee;
    // Registered like a job's acceptance, so that a process dying mid-call leaves a hold the reaper releases.
    const intentId = newTextCallIntentId();
    const outcome = await takeHold(deps, caller.accountId, intentId, estimate, deps.clock.now(), { model: spec.model.id, keyId: caller.keyId }, {
      key: { keyId: caller.keyId, limits: caller.limits, isJob: false },
    });
    if (outcome !== "reserved") throw refusalError(outcome, estimate);
    return new TextCall(deps, caller.accountId, intentId, spec, prices, toolFee);
  }

  /** Records that this chunk reached the caller (its usage is cumulative). */
  markDelivered(chunk: TextChunk): void {
    this.delivered = chunk.usage;
  }

  /**
   * Settles for what was delivered (at most hold + available: the rest is
   * recorded as a shortfall), or releases when nothing was. Idempotent.
   * Returns what was charged (0 while a settlement the store refused is retried in the background).
   */
  async end(): Promise<Money> {
    if (this.ended) return 0n;
    this.ended = true;
    const usage = this.delivered;
    // One charge entry: the tokens at the model's prices plus the built-in tools' per-call prices.
    const charge = usage && { amount: tokenCost(this.spec.model.id, this.prices, usage) + this.toolFee, usage };
    return (await endCallHold(this.deps, this.accountId, this.intentId, charge, "nothing_delivered")) ?? 0n;
  }
}
