// backends: embedded, real
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { BACKEND, call, createCustomer, eventually, finishedJob, startTestService, type ApiResponse, type Customer, type TestService } from "../support/harness.js";
import { checkExposition, familiesOf, parseExposition, valueOf, type Sample } from "../support/exposition.js";
import { Receiver } from "../support/webhook-receiver.js";

const IMAGE = "aimodel-3.1-flash-image";

/** Every family the issue asks for, by area; each must be declared by the exposition of a process running every role. */
const FAMILIES = [
  "http_server_requests_total", "http_server_request_duration_seconds", "http_server_requests_in_flight",
  "http_server_gateway_duration_seconds", "http_server_core_duration_seconds",
  "rpc_server_requests_total", "rpc_server_request_duration_seconds", "rpc_server_requests_in_flight",
  "jobs_accepted_total", "jobs_started_total", "jobs_finished_total", "jobs_queued", "jobs_oldest_queued_age_seconds",
  "job_queued_duration_seconds", "job_generation_duration_seconds", "jobs_taken_over_total", "jobs_reannounced_total",
  "job_acceptances_fenced_total", "jobs_unsettled", "jobs_last_scan_timestamp_seconds",
  "ledger_reservations_total", "ledger_settlements_total", "ledger_releases_total", "ledger_cas_conflicts_total",
  "ledger_unknown_outcomes_resolved_total", "ledger_round_operations", "ledger_round_duration_seconds", "idempotency_replays_total", "idempotency_refusals_total",
  "upstream_requests_total", "upstream_request_duration_seconds", "upstream_failovers_total", "upstream_route_healthy", "upstream_tokens_total",
  "webhook_attempts_total", "webhook_attempt_duration_seconds", "webhook_deliveries_total", "webhook_delivery_latency_seconds",
  "kafka_consumer_lag", "kafka_publish_duration_seconds", "kafka_publish_failures_total",
  "process_cpu_seconds_total", "process_resident_memory_bytes", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes",
];

/** What would make a label unbounded or leak something: ids, keys, tokens, URLs. */
const UNBOUNDED = /[0-9a-f]{8}-[0-9a-f]{4}-|acct_|key_|own_|gsk_|gso_|whsec_|https?:\/\/|\?/;

describe(`GET /metrics after a scripted run (${BACKEND} backend)`, () => {
  let service: TestService;
  let customer: Customer;
  let broke: Customer;
  let receiver: Receiver;
  let before_: Sample[];
  let text: string;
  let after_: Sample[];
  let acceptedAnswer: ApiResponse;
  const delta = (name: string, labels: Record<string, string> = {}) => valueOf(after_, name, labels) - valueOf(before_, name, labels);

  before(async () => {
    service = await startTestService();
    receiver = await new Receiver(() => 200).start();
    customer = await createCustomer(service, "10.00");
    broke = await createCustomer(service, "0.00");
    const webhook = await call(service, "PUT", `/admin/v1/accounts/${customer.accountId}/webhook`, { admin: true, body: { url: receiver.url } });
    assert.equal(webhook.status, 200, webhook.text);
    before_ = parseExposition((await call(service, "GET", "/metrics")).text);

    // The script: two jobs (one succeeds, one fails), a retry replayed, a key reused with another body (422), a 402.
    const create = (key: string, prompt: string, idempotencyKey?: string) =>
      call(service, "POST", "/api/v1/generations", {
        key, body: { model: IMAGE, prompt }, headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {},
      });
    acceptedAnswer = await create(customer.apiKey, "a lighthouse at dusk", "metrics-run-1");
    assert.equal(acceptedAnswer.status, 202, acceptedAnswer.text);
    const replay = await create(customer.apiKey, "a lighthouse at dusk", "metrics-run-1");
    assert.equal(replay.status, 202, replay.text);
    const reused = await create(customer.apiKey, "another prompt", "metrics-run-1");
    assert.equal(reused.status, 422, reused.text);
    const failing = await create(customer.apiKey, "a storm [simulate:fail]");
    assert.equal(failing.status, 202, failing.text);
    const refused = await create(broke.apiKey, "no money");
    assert.equal(refused.status, 402, refused.text);
    const jobs = [acceptedAnswer.json.job_id as string, failing.json.job_id as string];
    for (const jobId of jobs) await finishedJob(service, customer.apiKey, jobId);
    for (const jobId of jobs) await receiver.awaitJob(jobId);
    const settledAt = Date.now() / 1000;

    // Counted once its answer has ended: scrape until the deliveries and the reaper's scan show.
    text = (
      await eventually(
        () => call(service, "GET", "/metrics"),
        (r) => {
          const samples = parseExposition(r.text);
          return valueOf(samples, "webhook_deliveries_total", { outcome: "delivered" }) - valueOf(before_, "webhook_deliveries_total", { outcome: "delivered" }) >= 2 &&
            valueOf(samples, "jobs_last_scan_timestamp_seconds") > settledAt;
        },
        { timeoutMs: 20_000, what: "the deliveries, and a reaper scan after the jobs ended, in /metrics" },
      )
    ).text;
    after_ = parseExposition(text);
  });
  after(async () => {
    await receiver?.close();
    await service?.close();
  });

  it("when /metrics is read, then promtool accepts the exposition (syntax and naming conventions) and its content type is Prometheus text", async () => {
    const check = checkExposition(text);
    assert.ok(check.ok, check.output);
    const answer = await call(service, "GET", "/metrics");
    assert.match(answer.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  });

  it("when the exposition is read, then every metric family of the issue is declared", () => {
    const families = familiesOf(text);
    const missing = FAMILIES.filter((name) => !families.has(name));
    assert.deepEqual(missing, []);
  });

  it("when labels are read, then none carries an id, a key, a token or a URL", () => {
    const leaking = after_.flatMap((s) => Object.entries(s.labels).filter(([name, value]) => name !== "le" && UNBOUNDED.test(value)).map(([name, value]) => `${s.name}{${name}="${value}"}`));
    assert.deepEqual(leaking, []);
  });

  it("when the script ran, then the job counters moved as it expects: 2 accepted, 2 started, 1 succeeded, 1 failed, with their times observed", () => {
    assert.equal(delta("jobs_accepted_total", { model: IMAGE }), 2);
    assert.equal(delta("jobs_started_total", { model: IMAGE }), 2);
    assert.equal(delta("jobs_finished_total", { model: IMAGE, outcome: "succeeded" }), 1);
    assert.equal(delta("jobs_finished_total", { model: IMAGE, outcome: "failed" }), 1);
    assert.equal(delta("job_queued_duration_seconds_count", { model: IMAGE }), 2);
    assert.equal(delta("job_generation_duration_seconds_count", { model: IMAGE }), 2);
    assert.ok(valueOf(after_, "job_generation_duration_seconds_sum", { model: IMAGE }) > 0);
    assert.equal(valueOf(after_, "jobs_queued"), 0);
    assert.equal(valueOf(after_, "jobs_oldest_queued_age_seconds"), 0);
  });

  it("when the script ran, then money moved as it expects: 2 holds, 1 refused for funds (the 402), 1 settled, 1 released; 1 replay and 1 reused key", () => {
    assert.equal(delta("ledger_reservations_total", { outcome: "reserved" }), 2);
    assert.equal(delta("ledger_reservations_total", { outcome: "insufficient_funds" }), 1);
    // On Cassandra + Kafka every test process shares one store, and this service's reaper (every 500 ms) also
    // finishes what other test processes left behind on purpose (killed acceptances, killed workers): their
    // settlements and releases count here too. The embedded store is this service's alone: exact there.
    const atLeastOnShared = BACKEND === "real" ? (actual: number, expected: number) => assert.ok(actual >= expected, `${actual} >= ${expected}`) : assert.equal;
    atLeastOnShared(delta("ledger_settlements_total"), 1);
    atLeastOnShared(delta("ledger_releases_total"), 1);
    assert.equal(delta("idempotency_replays_total"), 1);
    assert.equal(delta("idempotency_refusals_total", { reason: "reused" }), 1);
  });

  it("when the script ran, then HTTP and RPC counts carry the route template, status and code", () => {
    assert.equal(delta("http_server_requests_total", { method: "POST", route: "/api/v1/generations", status_code: "202" }), 3);
    assert.equal(delta("http_server_requests_total", { method: "POST", route: "/api/v1/generations", status_code: "402" }), 1);
    assert.equal(delta("http_server_requests_total", { method: "POST", route: "/api/v1/generations", status_code: "422" }), 1);
    assert.ok(delta("http_server_requests_total", { method: "GET", route: "/api/v1/jobs/:jobId", status_code: "200" }) >= 2);
    assert.equal(delta("rpc_server_requests_total", { service: "GenerationService", method: "CreateGeneration", code: "OK" }), 3);
    assert.equal(delta("rpc_server_requests_total", { service: "GenerationService", method: "CreateGeneration", code: "FAILED_PRECONDITION" }), 1);
    assert.ok(delta("http_server_gateway_duration_seconds_count", { method: "POST", route: "/api/v1/generations" }) >= 5);
    assert.ok(delta("http_server_core_duration_seconds_count", { method: "POST", route: "/api/v1/generations" }) >= 5);
  });

  it("when a request that calls no provider is answered (an accepted job), then Server-Timing has the gateway's own time only", () => {
    const timing = acceptedAnswer.headers.get("server-timing") ?? "";
    assert.match(timing, /^gateway;dur=\d+\.\d\d$/);
  });

  it("when the script ran, then the upstream and the webhooks were counted: 2 calls, tokens in, 2 deliveries answered 2xx", () => {
    assert.equal(delta("upstream_requests_total", { route: "simulated", operation: "image" }), 2);
    assert.ok(delta("upstream_tokens_total", { route: "simulated", direction: "input" }) > 0);
    assert.equal(delta("webhook_attempts_total", { result: "2xx" }), 2);
    assert.equal(delta("webhook_deliveries_total", { outcome: "delivered" }), 2);
    assert.equal(delta("webhook_delivery_latency_seconds_count"), 2);
  });

  it("when the process is read, then Node's own metrics have values", () => {
    assert.ok(valueOf(after_, "process_resident_memory_bytes") > 0);
    assert.ok(valueOf(after_, "nodejs_heap_size_used_bytes") > 0);
  });

  it("when the service runs on Kafka, then publishes are timed per topic and consumer lag is reported per group and partition", { skip: BACKEND !== "real" }, () => {
    assert.ok(delta("kafka_publish_duration_seconds_count", { topic: "generation.requested" }) >= 2);
    const lag = after_.filter((s) => s.name === "kafka_consumer_lag");
    assert.ok(lag.some((s) => s.labels.group?.includes("generation-workers") && s.labels.partition !== undefined), JSON.stringify(lag));
  });

  it("when the service runs on Cassandra, then every money round is counted with the operations it carried and its time", { skip: BACKEND !== "real" }, () => {
    // The script's 2 holds, 1 refusal, 1 settlement and 1 release rode in rounds of one or more operations each.
    const rounds = delta("ledger_round_operations_count");
    assert.ok(rounds >= 1, `${rounds} rounds`);
    assert.ok(delta("ledger_round_operations_sum") >= Math.max(5, rounds));
    assert.equal(delta("ledger_round_duration_seconds_count"), rounds);
  });
});
