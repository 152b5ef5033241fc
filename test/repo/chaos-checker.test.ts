// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Webhook } from "standardwebhooks";
import { amountOf, checkHistory, signatureValid, type ChaosEntry, type ChaosHistory, type Violation } from "../../infra/chaos/checker.mjs";

/**
 * The chaos run's history checker (infra/chaos/checker.mjs) on small made-up histories: a clean one passes, and each
 * rule's breach is named. The chaos run itself (`npm run chaos`) is not part of the suite.
 */
let entryNo = 0;
function entry(type: ChaosEntry["type"], amount: string, reservedChange: string, jobId: string | null, after: [string, string]): ChaosEntry {
  return {
    entry_id: `e${++entryNo}`, type, amount, reserved_change: reservedChange, job_id: jobId,
    balance_after: after[0], reserved_after: after[1], created_at: new Date(1_700_000_000_000 + entryNo).toISOString(),
  };
}

/** One account credited 1.00, two jobs accepted (j1 done and charged 0.039, j2 failed and released), webhooks for both. */
function cleanHistory(): ChaosHistory {
  const chronological = [
    entry("credit", "1", "0", null, ["1", "0"]),
    entry("hold", "0", "0.039", "j1", ["1", "0.039"]),
    entry("hold", "0", "0.039", "j2", ["1", "0.078"]),
    entry("charge", "-0.039", "-0.039", "j1", ["0.961", "0.039"]),
    entry("release", "0", "-0.039", "j2", ["0.961", "0"]),
  ];
  return {
    faults: [{ name: "kill cassandra-2", start: 1000, end: 2000 }],
    requests: [
      { t: 500, kind: "image", status: 202, retryAfter: null },
      { t: 1500, kind: "image", status: 503, retryAfter: "1", ms: 12_000 },
      { t: 1600, kind: "image", status: 202, retryAfter: null },
    ],
    ops: [{ key: "k1", kind: "image", jobIds: ["j1"] }, { key: "k2", kind: "image", jobIds: ["j2", "j2"] }],
    credits: [{ accountId: "a1", amount: "1.00" }],
    accounts: [{
      accountId: "a1", balance: "0.961", reserved: "0", entries: chronological.reverse(), webhooks: true,
      jobs: [
        { job_id: "j1", status: "done", metadata: { chaos_key: "k1" }, usage: { charged: "0.039" } },
        { job_id: "j2", status: "failed", metadata: { chaos_key: "k2" }, usage: { charged: "0" } },
      ],
    }],
    webhooks: [
      { id: "msg_j1", jobId: "j1", status: "success", validSignature: true },
      { id: "msg_j1", jobId: "j1", status: "success", validSignature: true },
      { id: "msg_j2", jobId: "j2", status: "failed", validSignature: true },
    ],
  };
}

const rulesOf = (violations: Violation[]) => [...new Set(violations.map((v) => v.rule))].sort();

describe("the chaos run's history checker", () => {
  it("when every rule holds (a redelivered webhook with its same id included), then it passes with exact money", () => {
    const result = checkHistory(cleanHistory());
    assert.deepEqual(result.violations, []);
    assert.equal(result.pass, true);
    assert.equal(result.moneyExact, true);
    assert.match(result.verdict, /^PASS: 0 lost, 0 double-charged, money exact, every refusal 503 with Retry-After; 2 jobs accepted/);
    const fault = result.availability.find((row) => row.window === "kill cassandra-2")!;
    assert.deepEqual(
      { total: fault.total, ok: fault.ok, refused503: fault.refused503, share: fault.share2xx, slowestMs: fault.slowestMs },
      { total: 2, ok: 1, refused503: 1, share: 0.5, slowestMs: 12_000 },
    );
  });

  it("when a 202's job is not in the store, then it is counted lost", () => {
    const history = cleanHistory();
    history.ops.push({ key: "k3", kind: "text", jobIds: ["j3"] });
    const result = checkHistory(history);
    assert.equal(result.lost, 1);
    assert.deepEqual(rulesOf(result.violations), ["lost"]);
    assert.match(result.verdict, /^FAIL: 1 lost/);
  });

  it("when an accepted job is still processing or was canceled at the end, then its end is wrong", () => {
    const history = cleanHistory();
    history.accounts[0]!.jobs[1]!.status = "processing";
    assert.deepEqual(rulesOf(checkHistory(history).violations), ["job-end"]);
    history.accounts[0]!.jobs[1]!.status = "canceled";
    assert.ok(checkHistory(history).violations.some((v) => v.detail === "job j2 ended canceled, not done or failed"));
  });

  it("when one Idempotency-Key is answered with two jobs, or the store holds two jobs of one key, then idempotency is broken", () => {
    const answered = cleanHistory();
    answered.ops[0]!.jobIds.push("j2");
    assert.ok(checkHistory(answered).violations.some((v) => v.rule === "idempotency" && v.detail.includes("k1 answered with 2 jobs")));
    const stored = cleanHistory();
    stored.accounts[0]!.jobs[1]!.metadata = { chaos_key: "k1" };
    assert.ok(checkHistory(stored).violations.some((v) => v.rule === "idempotency" && v.detail.includes("k1 has 2 jobs in the store")));
  });

  it("when a job is charged twice, then it is double-charged and the money is not exact", () => {
    const history = cleanHistory();
    const account = history.accounts[0]!;
    account.entries.unshift(entry("charge", "-0.039", "0", "j1", ["0.922", "0"]));
    account.balance = "0.922";
    const result = checkHistory(history);
    assert.equal(result.doubleCharged, 1);
    assert.equal(result.moneyExact, false);
    assert.deepEqual(rulesOf(result.violations), ["double-charge", "hold", "money"]);
    assert.ok(result.violations.some((v) => v.detail === "a1: job j1 says it was charged 0.039, the statement charged it 0.078"));
  });

  it("when a hold never ends, then the hold rule and the reserved money at the end are named", () => {
    const history = cleanHistory();
    const account = history.accounts[0]!;
    account.entries.shift(); // j2's release
    account.reserved = "0.039";
    assert.deepEqual(rulesOf(checkHistory(history).violations), ["hold", "money"]);
  });

  it("when a failed job was charged, then it is named", () => {
    const history = cleanHistory();
    history.accounts[0]!.jobs[0]!.status = "failed";
    history.webhooks[0]!.status = history.webhooks[1]!.status = "failed";
    assert.ok(checkHistory(history).violations.some((v) => v.rule === "double-charge" && v.detail.includes("j1 is failed but was charged")));
  });

  it("when a hold was admitted beyond the available balance, then admission is named", () => {
    const history = cleanHistory();
    const account = history.accounts[0]!;
    account.entries.splice(3, 1, entry("hold", "0", "2", "j1", ["1", "2"]));
    assert.ok(checkHistory(history).violations.some((v) => v.rule === "admission" && v.detail.includes("balance 1, reserved 2")));
  });

  it("when the balance differs from credits minus charges by one unit of the last digit, then money is not exact", () => {
    const history = cleanHistory();
    history.credits[0]!.amount = "1.000000000001";
    const result = checkHistory(history);
    assert.equal(result.moneyExact, false);
    assert.deepEqual(rulesOf(result.violations), ["money"]);
  });

  it("when an entry's balance_after does not follow from the entries before it, then the statement does not reconcile", () => {
    const history = cleanHistory();
    history.accounts[0]!.entries[1]!.balance_after = "0.962";
    assert.deepEqual(rulesOf(checkHistory(history).violations), ["statement"]);
  });

  it("when a job has two webhook ids, none, or a delivery with a bad signature, then the webhook rule is named", () => {
    const two = cleanHistory();
    two.webhooks.push({ id: "msg_other", jobId: "j1", status: "success", validSignature: true });
    assert.ok(checkHistory(two).violations.some((v) => v.detail === "job j1 has 2 webhook ids"));
    const none = cleanHistory();
    none.webhooks = none.webhooks.filter((w) => w.jobId !== "j2");
    assert.ok(checkHistory(none).violations.some((v) => v.detail === "job j2 has 0 webhook ids"));
    const forged = cleanHistory();
    forged.webhooks[2]!.validSignature = false;
    assert.deepEqual(rulesOf(checkHistory(forged).violations), ["webhook"]);
  });

  it("when a request is answered 500, or 503 without Retry-After, then the refusal rule is named in its fault's window", () => {
    const history = cleanHistory();
    history.requests.push({ t: 1700, kind: "text", status: 500, retryAfter: null }, { t: 2500, kind: "text", status: 503, retryAfter: null });
    const result = checkHistory(history);
    assert.equal(result.violations.filter((v) => v.rule === "refusal").length, 2);
    assert.equal(result.availability.find((row) => row.window === "kill cassandra-2")!.bad, 1);
    assert.equal(result.availability.find((row) => row.window === "no fault")!.bad, 1);
    assert.match(result.verdict, /2 refusals not 503 with Retry-After/);
  });

  it("reads amounts as exact fixed-point and checks Standard Webhooks signatures", () => {
    assert.equal(amountOf("-0.039"), -39_000_000_000n);
    assert.equal(amountOf("1.000000000001") - amountOf("1"), 1n);
    assert.throws(() => amountOf("1e3"));
    const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    const body = JSON.stringify({ job_id: "j1", status: "success" });
    const at = new Date();
    const headers = { "webhook-id": "msg_j1", "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": new Webhook(secret).sign("msg_j1", at, body) };
    assert.equal(signatureValid(secret, { body, headers }), true);
    assert.equal(signatureValid(secret, { body: body.replace("success", "failed"), headers }), false);
    assert.equal(signatureValid(`whsec_${Buffer.alloc(32, 8).toString("base64")}`, { body, headers }), false);
    // Checked after the run: a signature made long ago is still the account's signature.
    const old = new Date(at.getTime() - 3_600_000);
    const oldHeaders = { ...headers, "webhook-timestamp": String(Math.floor(old.getTime() / 1000)), "webhook-signature": new Webhook(secret).sign("msg_j1", old, body) };
    assert.equal(signatureValid(secret, { body, headers: oldHeaders }), true);
  });
});
