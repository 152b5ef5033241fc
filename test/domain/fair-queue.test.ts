// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { FairQueue } from "../../src/domain/scheduling/fair-queue.js";

describe("fair queue between accounts", () => {
  it("when one account has a backlog and another adds one item, then the other's item comes second, not last", () => {
    const queue = new FairQueue();
    for (let i = 0; i < 5; i++) queue.push("busy", `busy-${i}`);
    queue.push("quiet", "quiet-0");
    assert.deepEqual([queue.shift(), queue.shift(), queue.shift()], ["busy-0", "quiet-0", "busy-1"]);
  });

  it("when several accounts wait, then they take turns and each keeps its own arrival order", () => {
    const queue = new FairQueue();
    queue.push("a", "a1");
    queue.push("a", "a2");
    queue.push("b", "b1");
    queue.push("c", "c1");
    queue.push("b", "b2");
    assert.deepEqual(queue.drain(), ["a1", "b1", "c1", "a2", "b2"]);
    assert.equal(queue.size, 0);
  });

  it("when an item is announced twice, then it waits once", () => {
    const queue = new FairQueue();
    assert.equal(queue.push("a", "x"), true);
    assert.equal(queue.push("a", "x"), false);
    assert.equal(queue.push("b", "x"), false);
    assert.equal(queue.size, 1);
    assert.equal(queue.has("x"), true);
    assert.equal(queue.shift(), "x");
    assert.equal(queue.has("x"), false);
    assert.equal(queue.shift(), undefined);
  });

  it("when an item was taken, then it may wait again", () => {
    const queue = new FairQueue();
    queue.push("a", "x");
    queue.shift();
    assert.equal(queue.push("a", "x"), true);
    assert.deepEqual(queue.drain(), ["x"]);
  });

  it("when an account's line empties and it adds again, then it joins the back of the turn order", () => {
    const queue = new FairQueue();
    queue.push("a", "a1");
    queue.push("b", "b1");
    queue.push("b", "b2");
    assert.equal(queue.shift(), "a1");
    queue.push("a", "a2");
    assert.deepEqual(queue.drain(), ["b1", "a2", "b2"]);
  });

  it("when the queue is empty, then size is 0 and drain returns nothing", () => {
    const queue = new FairQueue();
    assert.equal(queue.size, 0);
    assert.deepEqual(queue.drain(), []);
  });
});
