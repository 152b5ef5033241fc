import assert from "node:assert/strict";
import { balanceOf, pico, type TestService } from "./harness.js";
import { allEntries, assertLedgerReconciles } from "./ledger-helpers.js";
import { settledCharge } from "./vendor-sdk-helpers.js";

/** Published per-image prices (the spec's table); the tests are the oracle, not the service's price file. */
export const IMAGE_PRICES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  "aimodel-2.5-flash-image": { "1K": "0.039" },
  "aimodel-3.1-flash-image": { "1K": "0.067", "2K": "0.101", "4K": "0.151" },
  "aimodel-3.1-flash-lite-image": { "1K": "0.02" },
};

/** What an image answer's PNG measures for an aspect ratio and a long side (even sides, as the renderers make them). */
export function pngSizeFor(aspectRatio: string, longSide: number): { width: number; height: number } {
  const [w, h] = aspectRatio.split(":").map(Number) as [number, number];
  const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);
  return w >= h ? { width: longSide, height: even((longSide * h) / w) } : { width: even((longSide * w) / h), height: longSide };
}

/**
 * The call was charged exactly `price` (a decimal string): the balance lost it
 * once nothing is held, and the statement's newest entries are the call's
 * hold of `price` for `model` and its charge of `price`, reconciled with the balance.
 */
export async function assertImageCharged(
  service: TestService, apiKey: string, before: { balance: string }, model: string, price: string,
): Promise<void> {
  assert.equal(await settledCharge(service, apiKey, before), pico(price), "the balance lost the per-image price");
  const [charge, hold] = await allEntries(service, { key: apiKey });
  assert.equal(charge?.type, "charge", `the newest entry is the charge: ${JSON.stringify(charge)}`);
  assert.equal(pico(charge.amount), -pico(price));
  assert.equal(charge.model, model);
  assert.equal(hold?.type, "hold", `the entry before it is the hold: ${JSON.stringify(hold)}`);
  assert.equal(pico(hold.reserved_change), pico(price), "the hold was the per-image price");
  assert.equal(hold.model, model);
  await assertLedgerReconciles(service, { key: apiKey });
}

/** Nothing was charged: the balance is `amount` with nothing held, and the statement has no charge. */
export async function assertNothingCharged(service: TestService, apiKey: string, amount: string): Promise<void> {
  assert.deepEqual(await balanceOf(service, apiKey), { balance: amount, reserved: "0.00", available: amount, currency: "USD" });
  const entries = await allEntries(service, { key: apiKey });
  assert.deepEqual(entries.filter((entry) => entry.type === "charge"), [], "no charge on the statement");
}
