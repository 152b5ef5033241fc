import { badRequest } from "../errors/domain-error.js";
import type { Money } from "../money.js";
import { boundedRange } from "./statement.js";

/**
 * Usage reports (GET /api/v1/usage, GetUsage): settled charges only (a hold
 * not yet settled, a release, a credit count for nothing), grouped by model,
 * API key or UTC day, with request counts, tokens and exact spend.
 */

export const USAGE_GROUPINGS = ["model", "key", "day"] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

/** The widest range one report covers. */
export const MAX_USAGE_DAYS = 366;
/** The range when none is given: the last 30 days. */
export const DEFAULT_USAGE_DAYS = 30;

export interface UsageInput {
  readonly from?: Date;
  readonly to?: Date;
  readonly groupBy?: string;
}

export interface UsageQuery {
  readonly from: Date;
  readonly to: Date;
  readonly groupBy: UsageGrouping;
}

/** A settled charge, as the report reads it. */
export interface SettledCharge {
  readonly amount: Money;
  readonly model?: string;
  readonly keyId?: string;
  readonly promptTokens: number;
  readonly candidatesTokens: number;
  readonly at: Date;
}

export interface UsageRow {
  readonly group: string;
  readonly requests: number;
  readonly promptTokens: number;
  readonly candidatesTokens: number;
  /** What left the balance (positive). */
  readonly spend: Money;
}

export function checkGrouping(groupBy: string | undefined): UsageGrouping {
  if (groupBy === undefined || groupBy === "") return "model";
  if (!(USAGE_GROUPINGS as readonly string[]).includes(groupBy)) {
    throw badRequest("invalid_group_by", `group_by must be one of ${USAGE_GROUPINGS.join(", ")} (got "${groupBy}")`, { field: "group_by" });
  }
  return groupBy as UsageGrouping;
}

/** The range: [from, to), `to` defaulting to now and `from` to 30 days before `to`; at most 366 days wide. */
export function parseUsageQuery(input: UsageInput, now: Date): UsageQuery {
  const groupBy = checkGrouping(input.groupBy);
  const { from, to } = boundedRange(input, now, DEFAULT_USAGE_DAYS, MAX_USAGE_DAYS, "a usage report");
  return { from, to, groupBy };
}

/** The group a charge counts in: its model, its key ("" when none is known) or its UTC day. */
export function groupOf(charge: SettledCharge, groupBy: UsageGrouping): string {
  if (groupBy === "model") return charge.model ?? "";
  if (groupBy === "key") return charge.keyId ?? "";
  return charge.at.toISOString().slice(0, 10);
}

/** Running totals per group, added to one charge at a time: a report over a year holds its groups, never its charges. */
export class UsageTally {
  private readonly groups = new Map<string, { requests: number; promptTokens: number; candidatesTokens: number; spend: Money }>();

  constructor(private readonly query: UsageQuery) {}

  /** Counts a charge in its group when it falls in [from, to). */
  add(charge: SettledCharge): void {
    if (charge.at < this.query.from || charge.at >= this.query.to) return;
    const group = groupOf(charge, this.query.groupBy);
    const row = this.groups.get(group) ?? { requests: 0, promptTokens: 0, candidatesTokens: 0, spend: 0n };
    row.requests += 1;
    row.promptTokens += charge.promptTokens;
    row.candidatesTokens += charge.candidatesTokens;
    row.spend += charge.amount;
    this.groups.set(group, row);
  }

  /** One row per group, groups in ascending order. */
  rows(): UsageRow[] {
    // Groups are distinct keys of one map: no two compare equal.
    return [...this.groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([group, row]) => ({ group, ...row }));
  }
}

/** One row per group with charges in [from, to), groups in ascending order. */
export function summarizeUsage(charges: Iterable<SettledCharge>, query: UsageQuery): UsageRow[] {
  const tally = new UsageTally(query);
  for (const charge of charges) tally.add(charge);
  return tally.rows();
}
