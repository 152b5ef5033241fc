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

  it("when it follows a parent and the parent aborts, then its signal aborts with the parent's reason", () => {
    const parent = new AbortController();
    const abort = new LazyAbort(parent);
    const signal = abort.signal;
    const reason = new Error("the client went away");
    parent.abort(reason);
    assert.equal(signal.aborted, true);
    assert.strictEqual(signal.reason, reason);
  });

  it("when its parent was aborted before the signal was asked for, then the signal is aborted from the start", () => {
    const parent = new AbortController();
    parent.abort(new Error("gone"));
    assert.equal(new LazyAbort(parent).signal.aborted, true);
  });

  it("when it is aborted itself (the stream ended), then it stops following its parent and the parent is untouched", () => {
    const parent = new AbortController();
    const abort = new LazyAbort(parent);
    const signal = abort.signal;
    const ended = new Error("call ended");
    abort.abort(ended);
    parent.abort(new Error("later"));
    assert.strictEqual(signal.reason, ended);
  });

  it("when nobody asks for its signal, then its parent's signal is never read", () => {
    let read = 0;
    const parent = { get signal() { read++; return new AbortController().signal; } };
    const abort = new LazyAbort(parent);
    abort.abort(new Error("call ended"));
    assert.equal(read, 0);
  });
});
