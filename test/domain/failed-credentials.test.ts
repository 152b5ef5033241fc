// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { FailedCredentials } from "../../src/domain/accounts/failed-credentials.js";

describe("failed credentials per client (the limiter's state)", () => {
  it("when a client reaches the limit within its window, then it is refused until the window ends, with the seconds left", () => {
    const failures = new FailedCredentials({ limit: 3, windowMs: 60_000, maxClients: 10 });
    for (let at = 0; at < 3; at++) {
      assert.equal(failures.refusedFor("10.0.0.1", at), undefined);
      failures.failed("10.0.0.1", at);
    }
    assert.equal(failures.refusedFor("10.0.0.1", 3), 60);
    assert.equal(failures.refusedFor("10.0.0.1", 59_500), 1);
    assert.equal(failures.refusedFor("10.0.0.2", 3), undefined);
    assert.equal(failures.holds("10.0.0.2"), false, "a client that never failed is not held");
    assert.equal(failures.refusedFor("10.0.0.1", 60_000), undefined);
  });

  it("when a window ends, then the count starts over with the next failure", () => {
    const failures = new FailedCredentials({ limit: 2, windowMs: 1_000, maxClients: 10 });
    failures.failed("a", 0);
    failures.failed("a", 1_000);
    assert.equal(failures.refusedFor("a", 1_001), undefined);
    failures.failed("a", 1_500);
    assert.equal(failures.refusedFor("a", 1_501), 1);
  });

  it("when more clients fail than it may hold, then it holds maxClients and forgets the one whose window ends soonest", () => {
    const failures = new FailedCredentials({ limit: 1, windowMs: 60_000, maxClients: 3 });
    for (let i = 0; i < 1_000; i++) failures.failed(`10.0.${i >> 8}.${i & 255}`, i);
    assert.equal(failures.size, 3);
    assert.equal(failures.refusedFor("10.0.3.231", 1_000), 60);
    assert.equal(failures.refusedFor("10.0.0.0", 1_000), undefined);
  });

  it("when windows have ended, then they are dropped as new failures arrive", () => {
    const failures = new FailedCredentials({ limit: 1, windowMs: 100, maxClients: 100 });
    for (let i = 0; i < 50; i++) failures.failed(`c${i}`, 0);
    failures.failed("late", 500);
    assert.equal(failures.size, 1);
  });
});
