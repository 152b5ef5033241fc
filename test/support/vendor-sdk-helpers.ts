import assert from "node:assert/strict";
import { balanceOf, eventually, pico, type TestService } from "./harness.js";
import { VENDOR } from "./vendor-helpers.js";

/**
 * What the vendor's SDKs are given, and nothing else: the base URL (the SDK
 * appends `/v1beta/models/…`) and the key (the SDK sends it as
 * `x-goog-api-key`).
 */
export const sdkBaseUrl = (service: { url: string }) => service.url + VENDOR.replace(/\/v1beta$/, "");

/** Default prices of the decisions (per 1M tokens); the tests are the oracle, not the service's price file. */
export const FLASH = { model: "aimodel-3.5-flash", input: "0.30", output: "2.50" };

/** The models the spec lists as served by the synchronous text API (section 2.1), in its order. */
export const SPEC_TEXT_MODELS = [
  "aimodel-3-flash-preview",
  "aimodel-3.1-flash-lite",
  "aimodel-3.1-pro-preview",
  "aimodel-3.5-flash",
  "aimodel-3.5-flash-lite",
  "aimodel-3.6-flash",
  "aimodel-3.7-flash",
  "aimodel-omni-1.1-flash",
];

/** The image models, which answer generateContent with images: listed after the text models, in catalog order. */
export const SPEC_IMAGE_MODELS = ["aimodel-2.5-flash-image", "aimodel-3.1-flash-image", "aimodel-3-pro-image", "aimodel-3.1-flash-lite-image", "aimodel-nbx-2.1"];

/** What the vendor's models.list (and OpenAI's) lists: the text models, then the image models. */
export const LISTED_MODELS = [...SPEC_TEXT_MODELS, ...SPEC_IMAGE_MODELS];

/** The prompt limit in bytes by default (MAX_PROMPT_BYTES_TEXT, 1 MiB), as tokens of at most 4 bytes. */
export const DEFAULT_INPUT_TOKEN_LIMIT = (1024 * 1024) / 4;
export const TEXT_MAX_OUTPUT_TOKENS = 8192;

/** What the balance lost between `before` and the moment nothing is held any more, in picodollars. */
export async function settledCharge(service: TestService, apiKey: string, before: { balance: string }): Promise<bigint> {
  const after = await eventually(() => balanceOf(service, apiKey), (b) => b.reserved === "0.00", { what: "the reservation to clear" });
  return pico(before.balance) - pico(after.balance);
}

/** The balance is exactly `amount`, nothing held. */
export async function assertUntouched(service: TestService, apiKey: string, amount: string): Promise<void> {
  assert.deepEqual(await balanceOf(service, apiKey), { balance: amount, reserved: "0.00", available: amount, currency: "USD" });
}
