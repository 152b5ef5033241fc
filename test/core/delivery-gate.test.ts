// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DeliveryGate, destinationOf, MAX_BREAKERS, type Admission, type DeliveryGateSettings, type GateTicket } from "../../src/core/webhooks/delivery-gate.js";

const SETTINGS: DeliveryGateSettings = {
  maxPerDestination: 2, maxPerAccount: 3, maxInFlight: 5,
  breakerFailures: 3, breakerOpenMs: 1000, breakerMaxOpenMs: 4000, deferMs: 100, probeMs: 500,
};

function ticketOf(admission: Admission): GateTicket {
  assert.equal(admission.admitted, true, `refused: ${JSON.stringify(admission)}`);
  return (admission as Extract<Admission, { admitted: true }>).ticket;
}

function refusalOf(admission: Admission) {
  assert.equal(admission.admitted, false, "admitted");
  return admission as Extract<Admission, { admitted: false }>;
}

/** Opens the destination's breaker with `breakerFailures` unanswered requests ending at `at`. */
function trip(gate: DeliveryGate, destination: string, at: number): void {
  for (let i = 0; i < SETTINGS.breakerFailures; i++) ticketOf(gate.admit(destination, `acct-${i}`, at)).finish("unanswered", 100, at);
}

describe("delivery gate: fair webhook requests", () => {
  it("when more destinations fail than MAX_BREAKERS, then the gate keeps at most that many breakers, forgetting the one that failed longest ago", () => {
    const gate = new DeliveryGate(SETTINGS);
    for (let i = 0; i <= MAX_BREAKERS; i++) ticketOf(gate.admit(`http://gone-${i}`, "a", i)).finish("unanswered", 100, i);
    assert.equal(gate.size, MAX_BREAKERS, "only breakers are left (every lane is idle)");
    // gone-0 was forgotten; gone-1 kept its first failure, so two more open its breaker.
    for (let k = 0; k < SETTINGS.breakerFailures - 1; k++) ticketOf(gate.admit("http://gone-1", "a", MAX_BREAKERS + 1)).finish("unanswered", 100, MAX_BREAKERS + 1);
    assert.equal(gate.destination("http://gone-1").breaker, "open", "a breaker still failing is kept");
    assert.equal(gate.size, MAX_BREAKERS);
  });

  it("when a destination has its limit in flight, then the next request to it waits while another destination's goes", () => {
    const gate = new DeliveryGate(SETTINGS);
    ticketOf(gate.admit("http://hole", "a", 0));
    ticketOf(gate.admit("http://hole", "b", 0));
    const refused = refusalOf(gate.admit("http://hole", "c", 0));
    assert.equal(refused.reason, "destination_busy");
    assert.ok(refused.delayMs >= SETTINGS.deferMs);
    ticketOf(gate.admit("http://other", "c", 0));
    assert.deepEqual(gate.destination("http://hole"), { inFlight: 2, waiting: 1, breaker: "closed" });
  });

  it("when an account has its limit in flight over several destinations, then its next waits and another account's goes", () => {
    const gate = new DeliveryGate(SETTINGS);
    for (const port of [1, 2, 3]) ticketOf(gate.admit(`http://h:${port}`, "attacker", 0));
    assert.equal(refusalOf(gate.admit("http://h:4", "attacker", 0)).reason, "account_busy");
    ticketOf(gate.admit("http://h:4", "victim", 0));
  });

  it("when the process has its limit in flight, then further requests wait", () => {
    const gate = new DeliveryGate({ ...SETTINGS, maxPerAccount: 100, maxPerDestination: 100 });
    for (let i = 0; i < SETTINGS.maxInFlight; i++) ticketOf(gate.admit(`http://h:${i}`, `a${i}`, 0));
    assert.equal(refusalOf(gate.admit("http://h:99", "z", 0)).reason, "process_busy");
  });

  it("when a busy destination's backlog grows, then the waits grow with it (its returns are spread out, capped)", () => {
    const gate = new DeliveryGate(SETTINGS);
    const slow = ticketOf(gate.admit("http://slow", "a", 0));
    slow.finish("answered", 2000, 2000); // the lane learns its requests take seconds
    ticketOf(gate.admit("http://slow", "a", 2000));
    ticketOf(gate.admit("http://slow", "a", 2000));
    const delays = Array.from({ length: 20 }, () => refusalOf(gate.admit("http://slow", "a", 2000)).delayMs);
    assert.ok(delays[19]! > delays[0]!, `${delays}`);
    assert.ok(delays.every((d) => d <= SETTINGS.breakerMaxOpenMs), `${delays}`);
  });

  it("when a waiting request returns and a slot is free, then it goes and stops counting as waiting", () => {
    const gate = new DeliveryGate(SETTINGS);
    const first = ticketOf(gate.admit("http://d", "a", 0));
    ticketOf(gate.admit("http://d", "a", 0));
    refusalOf(gate.admit("http://d", "a", 0));
    first.finish("answered", 10, 10);
    ticketOf(gate.admit("http://d", "a", 200, true));
    assert.deepEqual(gate.destination("http://d"), { inFlight: 2, waiting: 0, breaker: "closed" });
  });

  it("when a waiting request never comes back to this process, then it stops counting once twice its wait and the probe's bound have passed", () => {
    const gate = new DeliveryGate(SETTINGS);
    const held = [ticketOf(gate.admit("http://d", "a", 0)), ticketOf(gate.admit("http://d", "a", 0))];
    const { delayMs } = refusalOf(gate.admit("http://d", "a", 0));
    assert.equal(gate.destination("http://d").waiting, 1);
    const lapsesAt = 2 * delayMs + SETTINGS.probeMs;
    held[0]!.finish("answered", 10, lapsesAt - 1);
    assert.equal(gate.destination("http://d").waiting, 1, "still expected back");
    held[1]!.finish("answered", 10, lapsesAt);
    assert.deepEqual(gate.destination("http://d"), { inFlight: 0, waiting: 0, breaker: "closed" });
    assert.equal(gate.size, 0, "nothing of it is kept");
  });

  it("when a destination fails to answer breakerFailures times in a row, then its breaker opens and refuses without counting a slot", () => {
    const gate = new DeliveryGate(SETTINGS);
    trip(gate, "http://hole", 100);
    const refused = refusalOf(gate.admit("http://hole", "x", 200));
    assert.equal(refused.reason, "breaker_open");
    assert.equal(refused.delayMs, 900);
    assert.deepEqual(gate.destination("http://hole"), { inFlight: 0, waiting: 0, breaker: "open" });
  });

  it("when an answer comes between failures, then the count starts again and the breaker stays closed", () => {
    const gate = new DeliveryGate(SETTINGS);
    for (const outcome of ["unanswered", "unanswered", "answered", "unanswered", "unanswered"] as const) {
      ticketOf(gate.admit("http://flaky", "a", 0)).finish(outcome, 10, 0);
    }
    assert.equal(gate.destination("http://flaky").breaker, "closed");
  });

  it("when the open period ends, then one probe goes and the others are refused until it ends", () => {
    const gate = new DeliveryGate(SETTINGS);
    trip(gate, "http://hole", 0);
    const probe = ticketOf(gate.admit("http://hole", "a", 1000));
    assert.equal(gate.destination("http://hole").breaker, "half-open");
    assert.equal(refusalOf(gate.admit("http://hole", "b", 1100)).reason, "breaker_open");
    probe.finish("answered", 50, 1050);
    assert.equal(gate.destination("http://hole").breaker, "closed");
    ticketOf(gate.admit("http://hole", "b", 1100));
  });

  it("when probes keep failing, then each open period doubles, up to the maximum", () => {
    const gate = new DeliveryGate(SETTINGS);
    trip(gate, "http://hole", 0);
    let at = 1000;
    const periods: number[] = [];
    for (let i = 0; i < 4; i++) {
      ticketOf(gate.admit("http://hole", "a", at)).finish("unanswered", 500, at + 500);
      const period = refusalOf(gate.admit("http://hole", "a", at + 500)).delayMs;
      periods.push(period);
      at += 500 + period;
    }
    assert.deepEqual(periods, [2000, 4000, 4000, 4000]);
  });

  it("when a probe's process never reports it, then after the probe's bound another request probes", () => {
    const gate = new DeliveryGate(SETTINGS);
    trip(gate, "http://hole", 0);
    ticketOf(gate.admit("http://hole", "a", 1000));
    assert.equal(refusalOf(gate.admit("http://hole", "b", 1400)).reason, "breaker_open");
    ticketOf(gate.admit("http://hole", "b", 1000 + SETTINGS.probeMs));
  });

  it("when a ticket ends without a request, then the breaker and the lanes' timing are untouched", () => {
    const gate = new DeliveryGate(SETTINGS);
    ticketOf(gate.admit("http://d", "a", 0)).finish("unanswered", 10, 0);
    ticketOf(gate.admit("http://d", "a", 0)).finish("none", 0, 0);
    ticketOf(gate.admit("http://d", "a", 0)).finish("unanswered", 10, 0);
    ticketOf(gate.admit("http://d", "a", 0)).finish("unanswered", 10, 0);
    assert.equal(gate.destination("http://d").breaker, "open");
  });

  it("when every request has ended and nothing waits or fails, then the gate keeps nothing", () => {
    const gate = new DeliveryGate(SETTINGS);
    const tickets = [ticketOf(gate.admit("http://d", "a", 0)), ticketOf(gate.admit("http://e", "b", 0))];
    for (const ticket of tickets) ticket.finish("answered", 10, 10);
    tickets[0]!.finish("answered", 10, 10); // a second finish changes nothing
    assert.equal(gate.size, 0);
  });

  it("when URLs differ only in path or query, then they are one destination", () => {
    assert.equal(destinationOf("http://h:81/a?x=1"), destinationOf("http://h:81/b"));
    assert.notEqual(destinationOf("http://h:81/a"), destinationOf("http://h:82/a"));
  });
});
