// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BodyAdmission } from "../../src/transport/admission.js";
import { BodyBudget, UploadSlots } from "../../src/transport/upload-slots.js";

/** Both ports' admission over one process's limits: 1 upload slot for bodies over 100 bytes, 1,000 bytes of body memory. */
function limits() {
  const uploadSlots = new UploadSlots(1);
  const bodyBudget = new BodyBudget(1_000);
  return { uploadSlots, bodyBudget, edge: { largeUploadBytes: 100 } };
}

describe("the admission module's body rules", () => {
  it("when a body is over its limit, then it is refused as too large before it takes a slot or memory", () => {
    const shared = limits();
    assert.deepEqual(new BodyAdmission(shared, 500).hold(501, 501), { kind: "too_large", limit: 500, size: 501 });
    assert.equal(shared.uploadSlots.inUse, 0);
    assert.equal(shared.bodyBudget.inUse, 0);
  });

  it("when a second large body arrives while the only upload slot is held, then it is refused for want of a slot, and admitted once the first ends", () => {
    const shared = limits();
    const first = new BodyAdmission(shared, 500);
    assert.equal(first.hold(200, 200), undefined);
    const second = new BodyAdmission(shared, 500);
    assert.deepEqual(second.hold(200, 200), { kind: "too_many_uploads" });
    assert.equal(shared.bodyBudget.inUse, 200, "the refused body took no memory");
    first.end();
    assert.equal(second.hold(200, 200), undefined);
  });

  it("when the body memory is spent, then the next body is refused and gives back the slot it took", () => {
    const shared = limits();
    const small = new BodyAdmission(shared, 1_000);
    assert.equal(small.hold(90, 90), undefined);
    const big = new BodyAdmission(shared, 1_000);
    assert.deepEqual(big.hold(950, 950), { kind: "no_body_memory" });
    assert.equal(shared.uploadSlots.inUse, 0);
    assert.equal(shared.bodyBudget.inUse, 90);
  });

  it("when a body of unknown size arrives piece by piece, then each piece takes memory until none is left, and ending it gives all back", () => {
    const shared = limits();
    const chunked = new BodyAdmission(shared, 10_000);
    assert.equal(chunked.take(600), undefined);
    assert.deepEqual(chunked.take(600), { kind: "no_body_memory" });
    assert.equal(shared.bodyBudget.inUse, 0, "a refusal gives back what the body held");
  });

  it("when a body has ended, then what still arrives takes nothing; when a client stream's message is released, then the next one takes its own", () => {
    const shared = limits();
    const ended = new BodyAdmission(shared, 1_000);
    ended.take(100);
    ended.end();
    assert.equal(ended.take(500), undefined);
    assert.equal(shared.bodyBudget.inUse, 0);
    const stream = new BodyAdmission(shared, 1_000);
    stream.hold(50, 50);
    stream.release();
    assert.equal(stream.hold(70, 70), undefined);
    assert.equal(shared.bodyBudget.inUse, 70);
  });
});
