import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RecentValues } from "../../src/shared/recent-values.js";

describe("RecentValues", () => {
  it("when a value is remembered, then it is found by its key and returned as remembered", () => {
    const recent = new RecentValues<string, number>(2);
    assert.equal(recent.remember("a", 1), 1);
    assert.equal(recent.get("a"), 1);
    assert.equal(recent.get("b"), undefined);
  });

  it("when it is full, then the next value starts it over: only that value is kept, and never more than max", () => {
    const recent = new RecentValues<string, number>(2);
    recent.remember("a", 1);
    recent.remember("b", 2);
    recent.remember("c", 3);
    assert.deepEqual([recent.get("a"), recent.get("b"), recent.get("c")], [undefined, undefined, 3]);
  });

  it("when a key is remembered again, then its value is replaced", () => {
    const recent = new RecentValues<string, number>(2);
    recent.remember("a", 1);
    recent.remember("a", 5);
    assert.equal(recent.get("a"), 5);
  });
});
