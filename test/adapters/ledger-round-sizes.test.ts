// backends: embedded, real
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { RoundSizes } from "../../src/adapters/cassandra/ledger/group-commit.js";

/*
 * When the Cassandra ledger's next round waits for operations on their way
 * (the rounds themselves: test/adapters/cassandra-stores.test.ts).
 */
describe("RoundSizes: when a round waits for operations to gather", () => {
  it("when no round has ended yet, then the first starts at once", () => {
    assert.equal(new RoundSizes().gatherFor(1), undefined);
  });

  it("when fewer operations queue than the largest recent round carried, then the round waits for that many, at most half the last round's time", () => {
    const rounds = new RoundSizes();
    rounds.ended(40, 6);
    rounds.ended(10, 4);
    assert.deepEqual(rounds.gatherFor(12), { target: 40, ms: 2 });
    assert.equal(rounds.gatherFor(40), undefined);
    assert.equal(rounds.gatherFor(41), undefined);
  });

  it("when the last round was slow, then the wait is still at most 5 ms", () => {
    const rounds = new RoundSizes();
    rounds.ended(64, 300);
    assert.deepEqual(rounds.gatherFor(1), { target: 64, ms: 5 });
  });

  it("when the last round took under 2 ms, then nothing waits (a timer cannot wait less than a millisecond)", () => {
    const rounds = new RoundSizes();
    rounds.ended(64, 1.9);
    assert.equal(rounds.gatherFor(1), undefined);
    rounds.ended(64, 2);
    assert.deepEqual(rounds.gatherFor(1), { target: 64, ms: 1 });
  });

  it("when a round carried more than one round may, then the wait is for a full round (128), not more", () => {
    const rounds = new RoundSizes();
    rounds.ended(500, 10);
    assert.deepEqual(rounds.gatherFor(127), { target: 128, ms: 5 });
    assert.equal(rounds.gatherFor(128), undefined);
  });

  it("when the load shrinks, then the rounds stop waiting for the old crowd after eight smaller rounds", () => {
    const rounds = new RoundSizes();
    rounds.ended(64, 10);
    for (let i = 0; i < 7; i++) {
      rounds.ended(3, 10);
      assert.equal(rounds.gatherFor(3)?.target, 64, `after ${i + 1} smaller rounds`);
    }
    rounds.ended(3, 10);
    assert.equal(rounds.gatherFor(3), undefined);
  });
});
