// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LINGER_MS, LingerQueue, type LingerTime } from "../../src/transport/http/edge/body-guard.js";
import { eventually } from "../support/eventually.js";

/**
 * The connections a refusal leaves lingering (their bodies discarded for at most LINGER_MS) are closed by one
 * shared timer, never one per refused request: its time is given here (a clock the test moves, timers it fires),
 * so the test counts the timers the queue starts and sees which connections it closes.
 */

/** A clock that moves only when told, and the timers started on it, fired when their time has come. */
function manualTime() {
  let now = 0;
  const timers: { at: number; callback: () => void; fired: boolean }[] = [];
  const time: LingerTime = {
    now: () => now,
    setTimeout(callback, ms) {
      timers.push({ at: now + ms, callback, fired: false });
      return { unref: () => {} };
    },
  };
  return {
    time,
    timers,
    /** Moves the clock to `to`, firing every timer due by then, in order. */
    advanceTo(to: number) {
      for (;;) {
        const due = timers.filter((timer) => !timer.fired && timer.at <= to).sort((a, b) => a.at - b.at)[0];
        if (!due) break;
        now = Math.max(now, due.at);
        due.fired = true;
        due.callback();
      }
      now = to;
    },
  };
}

/** A request whose body has not arrived, on a connection that records being closed. */
function lingeringRequest() {
  const request = {
    complete: false,
    closed: false,
    closedAt: 0,
    socket: { destroy: () => void ((request.closed = true), (request.closedAt = Date.now())) },
  };
  return request;
}

describe("the linger queue of refused requests", () => {
  it("when 200 refused requests linger at once, then one timer serves them all, and each is closed once LINGER_MS passed, not before", () => {
    const { time, timers, advanceTo } = manualTime();
    const queue = new LingerQueue(LINGER_MS, time);
    const requests = Array.from({ length: 200 }, lingeringRequest);
    for (const request of requests) queue.add(request);
    assert.equal(timers.length, 1, "one timer for 200 lingering requests");
    assert.equal(timers[0]!.at, LINGER_MS);

    advanceTo(LINGER_MS - 1);
    assert.equal(requests.filter((request) => request.closed).length, 0, "none closed before LINGER_MS");
    advanceTo(LINGER_MS);
    assert.equal(requests.filter((request) => request.closed).length, 200, "all closed at LINGER_MS");
    assert.equal(timers.length, 1, "no timer left armed for an empty queue");
  });

  it("when requests linger from different times, then the one timer is armed again for the oldest left, and a request whose body arrived meanwhile stays open", () => {
    const { time, timers, advanceTo } = manualTime();
    const queue = new LingerQueue(LINGER_MS, time);
    const first = lingeringRequest();
    const second = lingeringRequest();
    const third = lingeringRequest();
    queue.add(first);
    advanceTo(500);
    queue.add(second);
    advanceTo(900);
    queue.add(third);
    assert.equal(timers.length, 1, "entries added while the timer is armed start no timer");

    second.complete = true; // its body arrived whole: the connection serves its next request
    advanceTo(LINGER_MS);
    assert.deepEqual([first.closed, second.closed, third.closed], [true, false, false]);
    assert.equal(timers.length, 2, "re-armed once, for the oldest entry left");
    assert.equal(timers[1]!.at, 500 + LINGER_MS);

    advanceTo(900 + LINGER_MS);
    assert.deepEqual([first.closed, second.closed, third.closed], [true, false, true]);
    assert.equal(timers.length, 3);
    advanceTo(10 * LINGER_MS);
    assert.equal(timers.length, 3, "nothing left to arm for");
  });

  it("when a refused request lingers on the system's clock, then its connection is closed after LINGER_MS", async () => {
    const queue = new LingerQueue(LINGER_MS);
    const request = lingeringRequest();
    const started = Date.now();
    queue.add(request);
    await eventually(() => request.closed, Boolean, { timeoutMs: LINGER_MS + 5_000, what: "the lingering request to be closed" });
    assert.ok(request.closedAt - started >= LINGER_MS - 5, `closed after ${request.closedAt - started} ms`);
  });
});
