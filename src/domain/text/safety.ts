import { badRequest } from "../errors/domain-error.js";

/** The vendor's HarmBlockThresholds, loosest first: a later one blocks more. */
export const HARM_BLOCK_THRESHOLDS = [
  "HARM_BLOCK_THRESHOLD_UNSPECIFIED", "OFF", "BLOCK_NONE", "BLOCK_ONLY_HIGH", "BLOCK_MEDIUM_AND_ABOVE", "BLOCK_LOW_AND_ABOVE",
] as const;

/** The operator's minimum threshold per harm category (SAFETY_MIN_THRESHOLDS). */
export type SafetyMinimums = Readonly<Record<string, string>>;

const SETTING_KEYS = new Set(["category", "threshold", "method"]);

const strictness = (threshold: string) => HARM_BLOCK_THRESHOLDS.indexOf(threshold as (typeof HARM_BLOCK_THRESHOLDS)[number]);

const refused = (field: string, why: string) => badRequest("unsupported_field", `${field} is not supported by this API: ${why}`, { field });

/**
 * The caller's safetySettings as they go upstream: each checked ({category,
 * threshold} strings, a known threshold), a threshold looser than the
 * operator's minimum for its category raised to it, and the minimum added for
 * a category with a minimum the caller did not set. Undefined when neither
 * the caller nor the operator set any.
 */
export function safetySettingsUpstream(settings: unknown, minimums: SafetyMinimums = {}): Record<string, unknown>[] | undefined {
  if (settings !== undefined && !Array.isArray(settings)) throw refused("safetySettings", "expected a list of {category, threshold}");
  const given = (settings ?? []) as unknown[];
  const out: Record<string, unknown>[] = given.map((setting, i) => {
    const field = `safetySettings[${i}]`;
    if (typeof setting !== "object" || setting === null || Array.isArray(setting)) throw refused(field, "expected {category, threshold}");
    const entry = setting as Record<string, unknown>;
    for (const key of Object.keys(entry)) if (!SETTING_KEYS.has(key)) throw refused(`${field}.${key}`, "not a safety setting's field");
    if (typeof entry.category !== "string") throw refused(`${field}.category`, "expected a harm category");
    if (typeof entry.threshold !== "string" || strictness(entry.threshold) < 0) {
      throw refused(`${field}.threshold`, `expected one of ${HARM_BLOCK_THRESHOLDS.join(", ")}`);
    }
    const minimum = minimums[entry.category];
    return minimum !== undefined && strictness(minimum) > strictness(entry.threshold) ? { ...entry, threshold: minimum } : { ...entry };
  });
  for (const [category, threshold] of Object.entries(minimums)) {
    if (!out.some((setting) => setting.category === category)) out.push({ category, threshold });
  }
  return settings === undefined && out.length === 0 ? undefined : out;
}
