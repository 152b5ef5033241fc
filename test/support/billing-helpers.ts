import assert from "node:assert/strict";
import { balanceOf, call, eventually, pico, TERMINAL, type TestService } from "./harness.js";

export interface BalanceJson {
  balance: string;
  reserved: string;
  available: string;
  currency: string;
}

/** Decision 1 / "Money strings": exact decimals, at least two places, no trailing zeros past the second. */
const MONEY = /^-?\d+\.\d{2}(\d*[1-9])?$/;

/** Shape of the balance object, and the invariant that must hold at every instant: available == balance − reserved. */
export function assertBalanceObject(value: unknown): asserts value is BalanceJson {
  const b = value as BalanceJson;
  assert.deepEqual(Object.keys(b).sort(), ["available", "balance", "currency", "reserved"]);
  assert.equal(b.currency, "USD");
  for (const field of ["balance", "reserved", "available"] as const) {
    assert.match(b[field], MONEY, `${field} "${b[field]}" is not an exact money string`);
  }
  assert.equal(pico(b.available), pico(b.balance) - pico(b.reserved), `available != balance − reserved in ${JSON.stringify(b)}`);
}

export async function checkedBalance(service: TestService, apiKey: string): Promise<BalanceJson> {
  const b = (await balanceOf(service, apiKey)) as BalanceJson;
  assertBalanceObject(b);
  return b;
}

export interface Sample {
  readonly balance: BalanceJson;
  /** Job status read right after the balance: if still non-terminal, the balance was read mid-job. */
  readonly status: string;
}

/**
 * Polls balance then job until the job is terminal, checking the balance
 * invariant on every sample. Money moves before a job shows its end
 * ("recorded first, shown last"), so a sample whose status is not terminal
 * yet holds one of two balances: the job's hold, or already the final
 * balance (settled, not shown yet). `inFlight` is the former: the samples
 * taken while the hold was on, i.e. non-terminal and not yet the final
 * balance.
 */
export async function watchJob(service: TestService, apiKey: string, jobId: string, timeoutMs = 30_000) {
  const samples: Sample[] = [];
  let job: any;
  await eventually(
    async () => {
      const balance = await checkedBalance(service, apiKey);
      const response = await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: apiKey });
      assert.equal(response.status, 200, response.text);
      job = response.json;
      samples.push({ balance, status: job.status });
      return job.status as string;
    },
    (status) => TERMINAL.has(status),
    { timeoutMs, intervalMs: 15, what: `job ${jobId} to finish` },
  );
  const final = JSON.stringify(await checkedBalance(service, apiKey));
  const inFlight = samples.filter((s) => !TERMINAL.has(s.status) && JSON.stringify(s.balance) !== final).map((s) => s.balance);
  return { job, inFlight, samples };
}

/** Money → the service's string form, for readable failure messages only (assertions compare pico values). */
export function money(units: bigint): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  let fraction = (abs % 10n ** 12n).toString().padStart(12, "0").replace(/0+$/, "");
  if (fraction.length < 2) fraction = fraction.padEnd(2, "0");
  return `${negative ? "-" : ""}${abs / 10n ** 12n}.${fraction}`;
}

/** Exact price per 1M units × quantity (prices carry few decimals, so this divides evenly at pico scale). */
export function perMillion(pricePerMillion: string, quantity: number): bigint {
  const product = pico(pricePerMillion) * BigInt(quantity);
  assert.equal(product % 1_000_000n, 0n, "per-token price is not exact at picodollar scale");
  return product / 1_000_000n;
}

export const tokensOf = (text: string) => Math.ceil(Buffer.byteLength(text, "utf8") / 4);
