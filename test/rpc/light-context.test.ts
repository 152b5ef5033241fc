import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LazyAbort } from "../../src/transport/rpc/light-context.js";

describe("LazyAbort", () => {
  it("when the call is aborted before anyone asked for its signal, then the signal made later is already aborted, with the reason", () => {
    const abort = new LazyAbort();
    const reason = new Error("client went away");
    abort.abort(reason);
    assert.equal(abort.signal.aborted, true);
    assert.strictEqual(abort.signal.reason, reason);
  });

  it("when the signal was asked for first, then aborting fires it once, with the first reason", () => {
    const abort = new LazyAbort();
    const signal = abort.signal;
    let fired = 0;
    signal.addEventListener("abort", () => fired++);
    const first = new Error("first");
    abort.abort(first);
    abort.abort(new Error("second"));
    assert.equal(fired, 1);
    assert.strictEqual(signal.reason, first);
    assert.strictEqual(abort.signal, signal);
  });

  it("when nothing aborts the call, then its signal stays unaborted", () => {
    assert.equal(new LazyAbort().signal.aborted, false);
  });
});
