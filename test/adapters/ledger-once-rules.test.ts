// backends: embedded
/**
 * Decision 0039, the Cassandra ledger's rules (ledger-rules.ts, no I/O): a named credit or adjustment applies once per
 * account. Its once row is written with the round; a round that knows the row answers its entry and moves nothing;
 * a write of unknown outcome replayed from the journal answers a repeat from the row.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type AccountState, type Operation, type Outcome, type Pending } from "../../src/adapters/cassandra/ledger/account-state.js";
import { holdWrites } from "../../src/adapters/cassandra/ledger/ledger-rows.js";
import { apply, replayedOutcomes } from "../../src/adapters/cassandra/ledger/ledger-rules.js";

const NOW = Date.UTC(2026, 11, 3, 12);

/** An account of 10 USD (picodollars), at version 5, as its money row reads. */
const account = (): AccountState => ({
  balance: 10_000_000_000_000n, reserved: 0n, version: 5n, name: "", lowBalanceThreshold: undefined, lowBalance: false, journal: null,
  keys: new Map(), keyHolds: new Map(), openHolds: 0, openCounts: new Map(), holds: new Map(), once: new Map(),
});

const pending = (id: string, operation: Operation): Pending => ({ id, operation, resolve: () => {}, reject: () => {} });
const entryOf = (outcome: Outcome | undefined) => (outcome as { credited?: unknown; adjusted?: unknown; madeBefore?: unknown });

describe("named credits and adjustments in a Cassandra round", () => {
  it("when one operation id is given twice in a round, then the first moves the money and is to be written as a once row, the second answers its entry", () => {
    const state = account();
    state.once.set("op_a", null); // read by the round: absent
    const applied = apply(state, [
      pending("p1", { kind: "credit", amount: 1_000_000_000_000n, once: "op_a" }),
      pending("p2", { kind: "credit", amount: 1_000_000_000_000n, once: "op_a" }),
    ], NOW);
    assert.equal(state.balance, 11_000_000_000_000n, "credited once");
    assert.equal(applied.entries.length, 1);
    assert.deepEqual(applied.onceMade, ["op_a"]);
    assert.deepEqual(applied.changed, ["p1"]);
    assert.deepEqual(entryOf(applied.outcomes[1]).madeBefore, entryOf(applied.outcomes[0]).credited);
    const { writes, named } = holdWrites("acct", state, applied.touched, applied.onceMade);
    assert.deepEqual(named, ["once:op_a"]);
    assert.match(writes[0]!.query, /IF NOT EXISTS/);
    assert.equal(JSON.parse(writes[0]!.params[2] as string).balanceAfter, "11000000000000");
  });

  it("when the round knows the once row of a credit and of an adjustment, then both answer the entry made then and nothing moves", () => {
    const state = account();
    const made = { seq: "3000000", type: "adjustment" as const, amount: "-6000000000000", balanceAfter: "4000000000000", reservedChange: "0", reservedAfter: "0", at: NOW - 1000 };
    state.once.set("op_b", made);
    const applied = apply(state, [
      pending("p1", { kind: "adjust", amount: -6_000_000_000_000n, reason: "refund", once: "op_b" }),
      pending("p2", { kind: "credit", amount: 1n, once: "op_b" }),
    ], NOW);
    assert.equal(state.balance, 10_000_000_000_000n, "nothing moved (a debit of 6 would have been applied: 10 available)");
    assert.deepEqual([applied.entries.length, applied.changed.length, applied.onceMade.length], [0, 0, 0]);
    assert.deepEqual(applied.outcomes, [{ madeBefore: made }, { madeBefore: made }]);
  });

  it("when a lost write is replayed and a named operation made no entry in its journal, then it answers its once row's entry", () => {
    const state = account();
    const made = { seq: "2000000", type: "credit" as const, amount: "5000000000000", balanceAfter: "15000000000000", reservedChange: "0", reservedAfter: "0", at: NOW };
    state.once.set("op_c", made);
    const batch = [pending("p1", { kind: "credit", amount: 5_000_000_000_000n, once: "op_c" }), pending("p2", { kind: "adjust", amount: -1n, reason: "x" })];
    assert.deepEqual(replayedOutcomes(batch, state, new Map()), [{ madeBefore: made }, "insufficient_funds"]);
    const entry = { ...made, seq: "6000000", op: "p1" };
    assert.deepEqual(replayedOutcomes(batch.slice(0, 1), state, new Map([["p1", entry]])), [{ credited: entry }]);
  });
});
