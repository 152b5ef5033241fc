// backends: embedded
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";
import { call, createCustomer, startTestService, type Customer, type TestService } from "../support/harness.js";
import { bearer, grpcAddress, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";
import { VENDOR, readSse, streamRequest, userTurn } from "../support/vendor-helpers.js";
import { startVendorStub, type VendorStub } from "../support/vendor-stub.js";

/*
 * Server-Timing on every edge: this service's own time (`gateway`) and, when
 * the request called the provider, the time spent waiting for it
 * (`upstream`), so a client can tell our cost from the provider's. The
 * provider here is the vendor stub, made to wait a known time before it
 * answers: that wait must show as upstream, not as ours.
 */

const TEXT_MODEL = "aimodel-3.5-flash";
const PROVIDER_WAIT_MS = 300;

interface Timing { gateway: number; upstream?: number }

function parseTiming(header: string | null | undefined): Timing {
  const match = /^gateway;dur=(\d+\.\d\d)(?:, upstream;dur=(\d+\.\d\d))?$/.exec(header ?? "");
  assert.ok(match, `a Server-Timing of the documented form, got ${JSON.stringify(header)}`);
  return { gateway: Number(match[1]), ...(match[2] === undefined ? {} : { upstream: Number(match[2]) }) };
}

/** What a call that waited for the provider must show: the wait as upstream; ours below the wait (it is a few ms). */
function assertProviderWaitIsUpstream(timing: Timing, clientMs: number) {
  assert.ok(timing.upstream !== undefined, "a call that used the provider names its time");
  assert.ok(timing.upstream >= PROVIDER_WAIT_MS - 1, `upstream ${timing.upstream} ms covers the provider's ${PROVIDER_WAIT_MS} ms wait`);
  assert.ok(timing.gateway < PROVIDER_WAIT_MS, `our own ${timing.gateway} ms excludes the provider's wait`);
  assert.ok(timing.gateway + timing.upstream <= clientMs + 1, `the parts (${timing.gateway} + ${timing.upstream}) fit in what the client waited (${clientMs.toFixed(2)})`);
}

describe("Server-Timing: our time and the provider's", () => {
  let stub: VendorStub;
  let service: TestService;
  let customer: Customer;
  let grpcClients: grpc.Client[] = [];

  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey });
    customer = await createCustomer(service, "10.00");
  });
  after(async () => {
    for (const client of grpcClients) client.close();
    await service?.close();
    await stub?.close();
  });

  const withProviderWait = () => stub.delay(PROVIDER_WAIT_MS, { times: 1 });

  it("when a REST text call waits for the provider, then upstream;dur holds that wait and gateway;dur only ours", async () => {
    withProviderWait();
    const started = performance.now();
    const response = await call(service, "POST", `${VENDOR}/models/${TEXT_MODEL}:generateContent`, {
      headers: { "x-vendor-api-key": customer.apiKey }, body: userTurn("hello"),
    });
    const clientMs = performance.now() - started;
    assert.equal(response.status, 200);
    assertProviderWaitIsUpstream(parseTiming(response.headers.get("server-timing")), clientMs);
  });

  it("when an SSE stream waits for the provider's first chunk, then its head's upstream;dur holds that wait", async () => {
    withProviderWait();
    const started = performance.now();
    const response = await streamRequest(service, TEXT_MODEL, userTurn("hello"), { key: customer.apiKey });
    const clientMs = performance.now() - started;
    assert.equal(response.status, 200);
    assertProviderWaitIsUpstream(parseTiming(response.headers.get("server-timing")), clientMs);
    await readSse(response);
  });

  it("when a request calls no provider (a balance, a job), then Server-Timing names our time only", async () => {
    const balance = await call(service, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.equal(balance.status, 200);
    assert.equal(parseTiming(balance.headers.get("server-timing")).upstream, undefined);
    const unknownJob = await call(service, "GET", "/api/v1/jobs/00000000-0000-4000-8000-000000000000", { key: customer.apiKey });
    assert.equal(unknownJob.status, 404);
    assert.equal(parseTiming(unknownJob.headers.get("server-timing")).upstream, undefined);
  });

  describe("on the core port", () => {
    let text: grpc.Client;
    let generation: grpc.Client;

    before(() => {
      const pkg = loadGrpcPackage();
      const address = grpcAddress(service.grpcUrl);
      text = new pkg.TextService!(address, grpc.credentials.createInsecure());
      generation = new pkg.GenerationService!(address, grpc.credentials.createInsecure());
      grpcClients = [text, generation];
    });

    /** A grpc-js unary call with its response headers (initial metadata). */
    function unaryWithHeaders(client: grpc.Client, method: string, request: unknown, metadata: grpc.Metadata) {
      return new Promise<{ error: grpc.ServiceError | null; headers: grpc.Metadata | undefined }>((resolve) => {
        let headers: grpc.Metadata | undefined;
        const pending = (client as any)[method](request, metadata, { deadline: Date.now() + 15_000 }, (error: grpc.ServiceError | null) => resolve({ error, headers }));
        pending.on("metadata", (received: grpc.Metadata) => (headers = received));
      });
    }

    it("when GenerateContent over gRPC waits for the provider, then its response headers carry the same split", async () => {
      withProviderWait();
      const started = performance.now();
      const { error, headers } = await unaryWithHeaders(text, "GenerateContent", {
        model: TEXT_MODEL, contents: [{ role: "user", parts: [{ text: "hello" }] }],
      }, bearer(customer.apiKey));
      const clientMs = performance.now() - started;
      assert.equal(error, null);
      assertProviderWaitIsUpstream(parseTiming(String(headers?.get("server-timing")[0])), clientMs);
    });

    it("when GetJob over gRPC answers, or is refused, then the answer names our time only", async () => {
      const found = await unaryWithHeaders(generation, "GetJob", { jobId: "00000000-0000-4000-8000-000000000000" }, bearer(customer.apiKey));
      assert.equal(found.error?.code, grpc.status.NOT_FOUND);
      assert.equal(parseTiming(String(found.error?.metadata.get("server-timing")[0])).upstream, undefined);
      const refused = await rpcError(unary(generation, "GetJob", { jobId: "00000000-0000-4000-8000-000000000000" }, bearer("not-a-key")));
      assert.equal(refused.code, grpc.status.UNAUTHENTICATED);
      assert.equal(parseTiming(String(refused.metadata.get("server-timing")[0])).upstream, undefined);
    });

    it("when a handler crashes, then gRPC and Connect clients get INTERNAL \"internal error\" with Server-Timing, never the crash's message", async () => {
      const jobs = service.running.core!.deps.jobs;
      const get = jobs.get;
      jobs.get = async () => {
        throw new TypeError("secret detail of /var/lib/store");
      };
      try {
        const overGrpc = await unaryWithHeaders(generation, "GetJob", { jobId: "00000000-0000-4000-8000-000000000001" }, bearer(customer.apiKey));
        assert.equal(overGrpc.error?.code, grpc.status.INTERNAL);
        assert.equal(overGrpc.error?.details, "internal error");
        assert.equal(parseTiming(String(overGrpc.error?.metadata.get("server-timing")[0])).upstream, undefined);

        const client = createClient(GenerationService, createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" }));
        const failure = await client.getJob({ jobId: "00000000-0000-4000-8000-000000000001" }, { headers: { authorization: `Bearer ${customer.apiKey}` } })
          .then(() => undefined, (error: unknown) => ConnectError.from(error));
        assert.equal(failure?.code, Code.Internal);
        assert.equal(failure?.rawMessage, "internal error");
        assert.equal(parseTiming(failure?.metadata.get("server-timing")).upstream, undefined);
      } finally {
        jobs.get = get;
      }
    });

    it("when GenerateContent is called with the Connect protocol, then its response header carries the split too", async () => {
      withProviderWait();
      const client = createClient(TextService, createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" }));
      let header: Headers | undefined;
      const started = performance.now();
      await client.generateContent(
        { model: TEXT_MODEL, contents: [{ role: "user", parts: [{ data: { case: "text", value: "hello" } }] }] },
        { headers: { "x-vendor-api-key": customer.apiKey }, onHeader: (received) => (header = received) },
      );
      assertProviderWaitIsUpstream(parseTiming(header?.get("server-timing")), performance.now() - started);
    });

    it("when a stream is served by Connect on the core port, then its trailers carry the whole stream's split", async () => {
      withProviderWait();
      const client = createClient(TextService, createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" }));
      let trailer: Headers | undefined;
      const started = performance.now();
      for await (const _ of client.streamGenerateContent(
        { request: { model: TEXT_MODEL, contents: [{ role: "user", parts: [{ data: { case: "text", value: "hello" } }] }] } },
        { headers: { "x-vendor-api-key": customer.apiKey }, onTrailer: (received) => (trailer = received) },
      ));
      assertProviderWaitIsUpstream(parseTiming(trailer?.get("server-timing")), performance.now() - started);
      // A method that calls no provider, over the same transport: our time only.
      const jobs = createClient(GenerationService, createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" }));
      let listed: Headers | undefined;
      await jobs.listJobs({}, { headers: { authorization: `Bearer ${customer.apiKey}` }, onHeader: (received) => (listed = received) });
      assert.equal(parseTiming(listed?.get("server-timing")).upstream, undefined);
    });
  });
});
