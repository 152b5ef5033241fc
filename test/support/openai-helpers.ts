import assert from "node:assert/strict";
import { balanceOf, eventually, pico, type TestService } from "./harness.js";
import { assertLedgerReconciles, type LedgerEntryJson } from "./ledger-helpers.js";
import { VENDOR } from "./vendor-helpers.js";

/** What OpenAI's SDKs are given, and nothing else: the base URL (the SDK appends `/chat/completions`, `/models`) and the key. */
export const openAiBaseUrl = (service: { url: string }) => `${service.url}${VENDOR}/openai/`;

/** A 1×1 PNG as a data URI, as OpenAI's image_url takes an inline image. */
export const PNG_DATA_URI =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/**
 * The charge of the account's newest call, once nothing is held: the newest
 * `charge` entry of the statement (which reconciles with the balance), and
 * what the balance lost since `before`; both must be the same amount.
 */
export async function statementCharge(service: TestService, apiKey: string, before: { balance: string }): Promise<{ charged: bigint; entry: LedgerEntryJson }> {
  const after = await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "the reservation to clear" });
  const entries = await assertLedgerReconciles(service, { key: apiKey });
  const entry = entries.find((e) => e.type === "charge");
  assert.ok(entry, "a charge entry in the statement");
  const charged = -pico(entry.amount);
  assert.equal(pico(before.balance) - pico(after.balance), charged, "the balance lost exactly the statement's charge");
  return { charged, entry };
}
