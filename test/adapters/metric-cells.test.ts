// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Counter, Histogram, Registry } from "prom-client";
import { CounterFamily, GaugeFamily, HistogramFamily } from "../../src/adapters/observability/metric-cells.js";
import { checkExposition, parseExposition, valueOf } from "../support/exposition.js";

const BUCKETS = [0.001, 0.01, 0.1, 1];

describe("metric cells", () => {
  it("when a histogram cell observes values, then the exposition is what prom-client's Histogram writes for the same values", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const cell = new HistogramFamily<"route">({ name: "demo_seconds", help: "Demo.", labelNames: ["route"], buckets: BUCKETS, registers: [ours] })
      .cell({ route: "/a" });
    const reference = new Histogram({ name: "demo_seconds", help: "Demo.", labelNames: ["route"], buckets: BUCKETS, registers: [theirs] });
    // On a bound, between bounds, above every bound, and at zero.
    for (const value of [0, 0.001, 0.005, 0.1, 0.5, 2, 30]) {
      cell.observe(value);
      reference.observe({ route: "/a" }, value);
    }
    assert.equal(await ours.metrics(), await theirs.metrics());
    const samples = parseExposition(await ours.metrics());
    assert.equal(valueOf(samples, "demo_seconds_bucket", { route: "/a", le: "0.001" }), 2);
    assert.equal(valueOf(samples, "demo_seconds_bucket", { route: "/a", le: "+Inf" }), 7);
    assert.equal(valueOf(samples, "demo_seconds_count", { route: "/a" }), 7);
  });

  it("when counters are counted through cells, then each label set is one series with its own count, as prom-client's Counter writes it", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const family = new CounterFamily<"method" | "code">({ name: "demo_total", help: "Demo.", labelNames: ["method", "code"], registers: [ours] });
    const reference = new Counter({ name: "demo_total", help: "Demo.", labelNames: ["method", "code"], registers: [theirs] });
    const ok = family.cell({ method: "Get", code: "OK" });
    ok.inc();
    ok.inc(2);
    // Asked for again (labels in another order, extra fields ignored): the same cell.
    family.cell({ code: "OK", method: "Get", ...{ extra: "x" } } as { method: string; code: string }).inc();
    family.cell({ method: "Get", code: "NOT_FOUND" }).inc();
    reference.inc({ method: "Get", code: "OK" }, 4);
    reference.inc({ method: "Get", code: "NOT_FOUND" });
    assert.equal(await ours.metrics(), await theirs.metrics());
    assert.strictEqual(family.cell({ method: "Get", code: "OK" }), ok);
  });

  it("when a label is missing, then asking for the cell throws (no series with an undefined label)", () => {
    const family = new CounterFamily<"method">({ name: "demo_total", help: "Demo.", labelNames: ["method"], registers: [] });
    assert.throws(() => family.cell({} as { method: string }), /label method is missing/);
  });

  it("when a gauge cell goes up and down and label values need escaping, then promtool accepts the exposition and the value is the net", async () => {
    const registry = new Registry();
    const family = new GaugeFamily<"route">({ name: "demo_in_flight", help: "Demo \"quoted\" help.", labelNames: ["route"], registers: [registry] });
    const cell = family.cell({ route: 'a "quoted"\\path\n' });
    cell.inc();
    cell.inc();
    cell.dec();
    const text = await registry.metrics();
    const check = checkExposition(text);
    assert.ok(check.ok, check.output);
    assert.equal(valueOf(parseExposition(text), "demo_in_flight", { route: 'a "quoted"\\path\n' }), 1);
  });

  it("when the registry resets its metrics, then cells already handed out count again from zero", async () => {
    const registry = new Registry();
    const counter = new CounterFamily({ name: "demo_total", help: "Demo.", registers: [registry] }).cell({});
    const histogram = new HistogramFamily({ name: "demo_seconds", help: "Demo.", buckets: BUCKETS, registers: [registry] }).cell({});
    counter.inc(5);
    histogram.observe(0.5);
    registry.resetMetrics();
    counter.inc();
    histogram.observe(0.005);
    const samples = parseExposition(await registry.metrics());
    assert.equal(valueOf(samples, "demo_total"), 1);
    assert.equal(valueOf(samples, "demo_seconds_count"), 1);
    assert.equal(valueOf(samples, "demo_seconds_bucket", { le: "0.01" }), 1);
    assert.equal(valueOf(samples, "demo_seconds_bucket", { le: "0.001" }), 0);
  });
});
