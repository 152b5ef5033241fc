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
 * The charges of the account's newest `count` calls, newest first, once nothing is held: the newest `charge`
 * entries of the statement (which reconciles with the balance); the balance lost exactly their sum since `before`.
 */
export async function statementCharges(
  service: TestService, apiKey: string, before: { balance: string }, count: number,
): Promise<{ charged: bigint; entry: LedgerEntryJson }[]> {
  const after = await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "the reservation to clear" });
  const entries = await assertLedgerReconciles(service, { key: apiKey });
  const charges = entries.filter((e) => e.type === "charge").slice(0, count).map((entry) => ({ charged: -pico(entry.amount), entry }));
  assert.equal(charges.length, count, `${count} charge entries in the statement`);
  const sum = charges.reduce((total, { charged }) => total + charged, 0n);
  assert.equal(pico(before.balance) - pico(after.balance), sum, "the balance lost exactly the statement's charges");
  return charges;
}

/** The charge of the account's newest call (see statementCharges). */
export async function statementCharge(service: TestService, apiKey: string, before: { balance: string }) {
  return (await statementCharges(service, apiKey, before, 1))[0]!;
}
