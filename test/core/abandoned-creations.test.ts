// backends: embedded, real
/**
 * Issue 34, "A request the client abandoned is still billed" (spec §7 rule 2:
 * nothing is billed for a request interrupted before a response). A creation
 * without an Idempotency-Key whose answer never reached its client (the
 * socket or stream gone before the 202) is canceled, its hold released,
 * nothing charged, the job saying why (`client_gone`). With a key, the job
 * stays and a retry with the key finds it. Through the real ports: raw
 * HTTP/1.1 sockets on the gateway, raw HTTP/2 streams on the core port.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { CreateGenerationRequestSchema } from "../../gen/generation/v1/generation_service_pb.js";
import { SIMULATOR_MARKERS } from "../../src/adapters/provider/simulated/simulated-provider.js";
import { call, createCustomer, eventually, finishedJob, startTestService, type Customer, type TestService } from "../support/harness.js";
import { openExchange, requestHead } from "../support/raw-http.js";
import { connectH2, envelope } from "../transport/edge-helpers.js";
import { allEntries } from "../support/ledger-helpers.js";

const IMAGE = { model: "aimodel-2.5-flash-image", prompt: "a lighthouse", aspect_ratio: "1:1" };

describe("creations whose answer never reached the client", () => {
  let service: TestService;
  before(async () => {
    // Jobs take a moment, so a cancel finds them queued or being generated, never done.
    service = await startTestService({ SIMULATED_LATENCY_MS: "400" });
  });
  after(async () => {
    await service?.close();
  });

  const jobsOf = async (customer: Customer) => {
    const listed = await call(service, "GET", "/api/v1/jobs?limit=100", { key: customer.apiKey });
    assert.equal(listed.status, 200, listed.text);
    return listed.json.jobs as { job_id: string; status: string; error: string | null }[];
  };

  /**
   * Every job of the account (at least one, unless `someJob` is false) canceled for client_gone, the balance whole
   * with nothing reserved, and each job's hold ended by one release whose statement entry says client_gone.
   */
  async function assertNothingBilled(customer: Customer, opening: string, { someJob = true } = {}) {
    const jobs = await eventually(() => jobsOf(customer), (list) => (!someJob || list.length > 0) && list.every((job) => job.status === "canceled"), {
      timeoutMs: 20_000, what: "every abandoned job to be canceled",
    });
    for (const job of jobs) assert.equal(job.error, "client_gone", JSON.stringify(job));
    const balance = await eventually(
      () => call(service, "GET", "/api/v1/balance", { key: customer.apiKey }),
      (r) => r.json.reserved === "0.00",
      { what: "every hold to be released" },
    );
    assert.deepEqual([balance.json.balance, balance.json.reserved], [opening, "0.00"], "nothing was charged");
    const ends = (await allEntries(service, { key: customer.apiKey })).filter((entry) => entry.type === "charge" || entry.type === "release");
    assert.deepEqual(
      ends.map((entry) => [entry.job_id, entry.type, entry.reason]).sort(),
      jobs.map((job) => [job.job_id, "release", "client_gone"]).sort(),
      "each job's release says why: client_gone",
    );
    return jobs;
  }

  /** A whole POST /api/v1/generations on a raw socket, left open (a client's FIN also ends its answer in Node). */
  async function postAndHangUp(customer: Customer, body: object, headers: Record<string, string> = {}) {
    const payload = JSON.stringify(body);
    const exchange = await openExchange(service.url, requestHead("POST", "/api/v1/generations", {
      authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload), ...headers,
    }));
    exchange.socket.write(payload);
    return exchange;
  }

  it("when 20 REST clients hang up right after sending the body, then no job they created is billed, and each job and its release entry say client_gone", async () => {
    const customer = await createCustomer(service, "10.00");
    // Each closes its side right after the body (FIN), then the socket is gone.
    const exchanges = await Promise.all(Array.from({ length: 20 }, async () => {
      const exchange = await postAndHangUp(customer, IMAGE);
      exchange.socket.end();
      return exchange;
    }));
    for (const exchange of exchanges) exchange.socket.destroy();
    // A body that arrived whole is accepted (as the issue saw: all 20 on the embedded store), then canceled; one whose
    // hang-up was seen before its acceptance made no job at all. Either way nothing is billed.
    const jobs = await assertNothingBilled(customer, "10.00");
    assert.ok(jobs.length <= 20, `${jobs.length} jobs from 20 requests`);
  });

  it("when a REST client waiting with Prefer: wait hangs up after its job was accepted, then the job is canceled and nothing is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const exchange = await postAndHangUp(customer, { ...IMAGE, prompt: `a slow one ${SIMULATOR_MARKERS.slow}` }, { prefer: "wait=30" });
    await eventually(() => jobsOf(customer), (jobs) => jobs.length === 1, { what: "the job to be accepted" });
    exchange.socket.destroy();
    const [job] = await assertNothingBilled(customer, "10.00");
    assert.equal(job?.status, "canceled");
  });

  it("when a text job was already being generated as its waiting REST client hung up, then it is canceled and charged nothing", async () => {
    const customer = await createCustomer(service, "10.00");
    const exchange = await postAndHangUp(customer, { model: "aimodel-3.5-flash", prompt: `write a long story ${SIMULATOR_MARKERS.slow}` }, { prefer: "wait=30" });
    await eventually(() => jobsOf(customer), (jobs) => jobs[0]?.status === "processing", { what: "a worker to take the job" });
    exchange.socket.destroy();
    const [job] = await assertNothingBilled(customer, "10.00");
    assert.equal((job as unknown as { usage: { charged: string } }).usage.charged, "0.00");
  });

  it("when a Connect client of the gateway port waiting for its job hangs up after it was accepted, then the job is canceled and nothing is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const payload = JSON.stringify({ model: IMAGE.model, prompt: `a slow one ${SIMULATOR_MARKERS.slow}`, aspectRatio: "1:1", waitSeconds: 30 });
    const exchange = await openExchange(service.url, requestHead("POST", "/generation.v1.GenerationService/CreateGeneration", {
      authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json", "connect-protocol-version": "1",
      "content-length": Buffer.byteLength(payload),
    }));
    exchange.socket.write(payload);
    await eventually(() => jobsOf(customer), (jobs) => jobs.length === 1, { what: "the job to be accepted" });
    exchange.socket.destroy();
    const [job] = await assertNothingBilled(customer, "10.00");
    assert.equal(job?.status, "canceled");
  });

  it("when a creation pipelined behind a slow request loses its connection, then its job is canceled and nothing is charged", async () => {
    const customer = await createCustomer(service, "10.00");
    const waiting = JSON.stringify({ ...IMAGE, prompt: `first, slow ${SIMULATOR_MARKERS.slow}` });
    const behind = JSON.stringify(IMAGE);
    const head = (payload: string, extra: Record<string, string> = {}) => requestHead("POST", "/api/v1/generations", {
      authorization: `Bearer ${customer.apiKey}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload), ...extra,
    });
    // The second's 202 queues behind the first's answer, which waits for its slow job: neither is written when the connection dies.
    const exchange = await openExchange(service.url, head(waiting, { prefer: "wait=30" }) + waiting + head(behind) + behind);
    await eventually(() => jobsOf(customer), (jobs) => jobs.length === 2, { what: "both pipelined jobs to be accepted" });
    exchange.socket.destroy();
    const jobs = await assertNothingBilled(customer, "10.00");
    assert.equal(jobs.length, 2);
  });

  it("when a REST client with an Idempotency-Key hangs up, then its job stays, is charged once, and a retry with the key finds it", async () => {
    const customer = await createCustomer(service, "10.00");
    // It waits for its job, so its answer is still unwritten when it hangs up after the acceptance.
    const slow = { ...IMAGE, prompt: `kept ${SIMULATOR_MARKERS.slow}` };
    const exchange = await postAndHangUp(customer, slow, { "idempotency-key": "kept-after-hang-up", prefer: "wait=30" });
    const [kept] = await eventually(() => jobsOf(customer), (jobs) => jobs.length === 1, { what: "the job to be accepted" });
    exchange.socket.destroy();
    // Until the acceptance has recorded its answer under the key, a retry is told 409 "retry shortly" (the job is listed first on Cassandra).
    const retry = await eventually(
      () => call(service, "POST", "/api/v1/generations", { key: customer.apiKey, body: slow, headers: { "idempotency-key": "kept-after-hang-up" } }),
      (answer) => answer.status !== 409,
      { what: "the acceptance to record its answer under the key" },
    );
    assert.equal(retry.status, 202, retry.text);
    assert.equal(retry.json.job_id, kept!.job_id);
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal((await finishedJob(service, customer.apiKey, kept!.job_id)).status, "done");
    const balance = await call(service, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.deepEqual([balance.json.balance, balance.json.reserved], ["9.961", "0.00"], "the kept job is charged once (0.039)");
  });

  describe("on the core port's gRPC", () => {
    const message = (prompt: string, waitSeconds = 0) =>
      envelope(toBinary(CreateGenerationRequestSchema, create(CreateGenerationRequestSchema, {
        model: IMAGE.model, prompt, aspectRatio: IMAGE.aspect_ratio, waitSeconds,
      })));
    const headers = (customer: Customer) => ({
      ":method": "POST", ":path": "/generation.v1.GenerationService/CreateGeneration",
      "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${customer.apiKey}`,
    });

    it("when 30 CreateGeneration calls are each reset right after their message, then nothing any of them created is billed", async () => {
      const customer = await createCustomer(service, "10.00");
      const session = connectH2(service.grpcUrl);
      try {
        const streams = Array.from({ length: 30 }, () => {
          const stream = session.request(headers(customer));
          stream.on("error", () => {});
          stream.end(message(IMAGE.prompt));
          return stream;
        });
        await Promise.all(streams.map((stream) => new Promise<void>((resolve) => stream.write("", () => resolve()))));
        for (const stream of streams) stream.close(http2.constants.NGHTTP2_CANCEL);
        await Promise.all(streams.map((stream) => (stream.closed ? undefined : once(stream, "close"))));
      } finally {
        session.destroy();
      }
      // On a quiet loopback the reset mostly arrives before the call is handled (no job at all); under load
      // some are handled first, as the issue saw. Either way nothing is billed; the next test pins the handled case.
      await assertNothingBilled(customer, "10.00", { someJob: false });
    });

    it("when a CreateGeneration call waiting for its job is reset after the job was accepted, then the job is canceled and nothing is charged", async () => {
      const customer = await createCustomer(service, "10.00");
      const session = connectH2(service.grpcUrl);
      try {
        const stream = session.request(headers(customer));
        stream.on("error", () => {});
        stream.end(message(`a slow one ${SIMULATOR_MARKERS.slow}`, 30));
        await eventually(() => jobsOf(customer), (jobs) => jobs.length === 1, { what: "the job to be accepted" });
        stream.close(http2.constants.NGHTTP2_CANCEL);
      } finally {
        session.destroy();
      }
      const [job] = await assertNothingBilled(customer, "10.00");
      assert.equal(job?.error, "client_gone");
    });
  });
});
