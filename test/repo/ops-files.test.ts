// backends: embedded
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { call, startTestService, type TestService } from "../support/harness.js";
import { familiesOf } from "../support/exposition.js";

const RULES = "ops/prometheus/alerts.yml";
const RULE_TESTS = "ops/prometheus/alerts.test.yml";
const SCRAPE_CONFIGS = ["ops/prometheus/prometheus.yml", "ops/prometheus/compose.yml"];
const DASHBOARD = "ops/grafana/generation-service.json";

/** The service's metric names as they appear in a query (a histogram's _bucket, _sum and _count belong to its family). */
const METRIC = /\b(?:http_server|rpc_server|jobs?|ledger|idempotency|upstream|webhook|kafka|process|nodejs)_[a-z0-9_]+/g;
const familyOf = (name: string) => name.replace(/_(bucket|sum|count)$/, "");

function promtool(...args: string[]) {
  const run = spawnSync("promtool", args, { encoding: "utf8" });
  if (run.error) throw run.error;
  return { ok: run.status === 0, output: `${run.stdout}${run.stderr}` };
}

interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly targets?: { readonly expr: string }[];
}

describe("ops/: the alert rules and the Grafana dashboard", () => {
  let service: TestService;
  let families: Map<string, string>;
  before(async () => {
    service = await startTestService();
    families = familiesOf((await call(service, "GET", "/metrics")).text);
  });
  after(async () => {
    await service?.close();
  });

  it("when promtool checks the alert rules and the scrape configurations (the example, docker-compose's), then all are valid", () => {
    const rules = promtool("check", "rules", RULES);
    assert.ok(rules.ok, rules.output);
    assert.match(rules.output, /SUCCESS: 8 rules found/);
    for (const file of SCRAPE_CONFIGS) {
      const config = promtool("check", "config", file);
      assert.ok(config.ok, `${file}: ${config.output}`);
    }
  });

  it("when promtool runs the rules' unit tests, then every alert fires on the series that should fire it and not before", () => {
    const tests = promtool("test", "rules", RULE_TESTS);
    assert.ok(tests.ok, tests.output);
  });

  it("when the rules are read, then they cover 5xx rate, queue age, consumer lag, dead letters, upstream failures and the settlement backlog", () => {
    const rules = readFileSync(RULES, "utf8");
    for (const metric of ["http_server_requests_total", "jobs_oldest_queued_age_seconds", "kafka_consumer_lag", "webhook_deliveries_total", "upstream_requests_total", "jobs_unsettled"]) {
      assert.match(rules, new RegExp(`expr:[^\\n]*\\n?[^\\n]*${metric}`), metric);
    }
  });

  it("when the rules and the dashboard name a metric, then the service exposes it", () => {
    const named = new Set([...readFileSync(RULES, "utf8").matchAll(METRIC), ...readFileSync(DASHBOARD, "utf8").matchAll(METRIC)].map(([name]) => familyOf(name)));
    assert.ok(named.size > 20, `only ${named.size} metrics named`);
    const unknown = [...named].filter((name) => !families.has(name));
    assert.deepEqual(unknown, []);
  });

  it("when the dashboard is read, then it is a Grafana dashboard whose panels have unique ids, titles and a query each", () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as { uid: string; title: string; panels: Panel[]; templating: { list: { name: string }[] } };
    assert.equal(dashboard.uid, "generation-service");
    assert.deepEqual(dashboard.templating.list.map((v) => v.name), ["datasource", "job"]);
    const ids = dashboard.panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length);
    const charts = dashboard.panels.filter((p) => p.type !== "row");
    assert.ok(charts.length >= 20);
    for (const panel of charts) {
      assert.ok(panel.title, `panel ${panel.id} has a title`);
      assert.ok((panel.targets ?? []).length > 0 && panel.targets!.every((t) => new RegExp(METRIC.source).test(t.expr)), `${panel.title} queries a metric`);
    }
  });
});
