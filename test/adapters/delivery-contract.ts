import { it } from "node:test";
import assert from "node:assert/strict";
import type { DeliveryLog } from "../../src/ports/delivery-log.js";

/** What every DeliveryLog does for the panel: deliveries by account, dead letters, and a redelivery that went through. */
export function deliveryListingContract(open: () => Promise<DeliveryLog>, unique: () => string): void {
  it("when deliveries of two accounts are recorded, then each account lists its own, most recently attempted first, and the exhausted job deliveries (not failed test events) are the dead letters until redelivered", async () => {
    const log = await open();
    const [a, b] = [`acct_a_${unique()}`, `acct_b_${unique()}`];
    const at = (second: number) => new Date(Date.UTC(2026, 10, 24, 10, 0, second));
    const id = (name: string) => `${name}_${a}`;
    await log.recordAttempt(id("old"), { jobId: "job-old", accountId: a }, { at: at(1), url: "https://a.test", status: 200 });
    await log.finish(id("old"), "delivered");
    await log.recordAttempt(id("failing"), { jobId: "job-f", accountId: a }, { at: at(2), url: "https://a.test", status: 500 });
    await log.recordAttempt(id("test"), { jobId: "", accountId: a }, { at: at(3), url: "https://a.test", status: 204 });
    await log.recordAttempt(id("failing"), { jobId: "job-f", accountId: a }, { at: at(4), url: "https://a.test", error: "timeout" });
    assert.equal(await log.finish(id("failing"), "exhausted"), true);
    await log.recordAttempt(id("other"), { jobId: "job-b", accountId: b }, { at: at(5), url: "https://b.test", status: 200 });

    const listed = await log.listByAccount(a, 10);
    assert.deepEqual(listed.map((r) => r.messageId), [id("failing"), id("test"), id("old")], "by last attempt, newest first");
    assert.deepEqual(listed[0]!.attempts.map((x) => x.status ?? x.error), [500, "timeout"]);
    assert.equal(listed[1]!.jobId, "", "a test event has no job");
    assert.deepEqual((await log.listByAccount(a, 1)).map((r) => r.messageId), [id("failing")]);
    assert.deepEqual((await log.listByAccount(b, 10)).map((r) => r.accountId), [b]);

    await log.recordAttempt(id("failed-test"), { jobId: "", accountId: a }, { at: at(3), url: "https://a.test", status: 404 });
    await log.finish(id("failed-test"), "exhausted");
    const dead = (await log.listExhausted(1000)).filter((r) => r.accountId === a);
    assert.deepEqual(dead.map((r) => [r.messageId, r.state]), [[id("failing"), "exhausted"]]);

    await log.recordAttempt(id("failing"), { jobId: "job-f", accountId: a }, { at: at(6), url: "https://a.test", status: 200 });
    assert.equal(await log.redelivered(id("failing")), true);
    assert.equal(await log.redelivered(id("failing")), false, "delivered stays delivered");
    assert.equal(await log.redelivered(id("old")), false);
    assert.equal((await log.get(id("failing")))?.state, "delivered");
    assert.deepEqual((await log.listExhausted(1000)).filter((r) => r.accountId === a), [], "no longer a dead letter");
  });
}
