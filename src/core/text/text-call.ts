import { randomUUID } from "node:crypto";
import { DomainError } from "../../domain/errors/domain-error.js";
import type { Money } from "../../domain/money.js";
import { tokenCost, tokenEstimate, type TokenUsage } from "../../domain/pricing/quotes.js";
import type { TextSpec } from "../../domain/validation/text-request.js";
import type { TextChunk } from "../../ports/provider.js";
import type { Caller } from "../auth/api-key-auth.js";
import type { CoreDeps } from "../core-deps.js";

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
    private readonly spec: TextSpec,
    private readonly reservationId: string,
    private readonly prices: Parameters<typeof tokenCost>[1],
  ) {}

  static async open(deps: CoreDeps, caller: Caller, spec: TextSpec): Promise<TextCall> {
    const prices = (await deps.settings.prices()).get(spec.model.id);
    const estimate: Money = tokenEstimate(spec.model.id, prices, spec.promptTokens, spec.maxOutputTokens);
    const reservationId = `text:${randomUUID()}`;
    const outcome = await deps.ledger.reserve(caller.accountId, reservationId, estimate);
    if (outcome === "insufficient_funds") {
      throw new DomainError("insufficient_funds", "insufficient_funds", "the available balance does not cover this request", {
        required: estimate.toString(),
      });
    }
    if (outcome !== "reserved") throw new DomainError("unauthenticated", "inactive_account", "the key's account no longer exists");
    return new TextCall(deps, caller.accountId, spec, reservationId, prices);
  }

  /** Records that this chunk reached the caller (its usage is cumulative). */
  markDelivered(chunk: TextChunk): void {
    this.delivered = chunk.usage;
  }

  /** Settles for what was delivered, or releases when nothing was. Idempotent. */
  async end(): Promise<Money> {
    if (this.ended) return 0n;
    this.ended = true;
    if (!this.delivered) {
      await this.deps.ledger.release(this.accountId, this.reservationId);
      return 0n;
    }
    const cost = tokenCost(this.spec.model.id, this.prices, this.delivered);
    await this.deps.ledger.settle(this.accountId, this.reservationId, cost);
    return cost;
  }
}
