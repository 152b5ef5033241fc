// backends: embedded
import { after, before, describe, it, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { Readiness } from "../../src/core/health/readiness.js";
import { listenRpc } from "../../src/transport/rpc/rpc-server.js";
import { eventually, startTestService, type TestService } from "../support/harness.js";
import { errorDetailOf, loadGrpcPackage, rpcError, unary } from "../support/rpc-helpers.js";
import { goTool, runTool as run } from "../support/go-tools.js";
import { REPO_ROOT } from "../support/repo.js";

const PROTO_ROOT = join(REPO_ROOT, "proto");
const HEALTH_PROTO = "grpc/health/v1/health.proto";
const RETRY_AFTER = 7;
const SERVICES = [
  "generation.v1.GenerationService",
  "generation.v1.TextService",
  "generation.v1.AdminService",
  "generation.v1.AccountService",
  "generation.v1.FileService",
];

/** grpc.health.v1.Health as any grpc-js user loads it: from the vendored .proto file. */
function healthClientAt(address: string): grpc.Client {
  const definition = protoLoader.loadSync(HEALTH_PROTO, { includeDirs: [PROTO_ROOT], enums: String, defaults: true });
  const loaded = grpc.loadPackageDefinition(definition) as any;
  return new loaded.grpc.health.v1.Health(address, grpc.credentials.createInsecure());
}

/** Readiness as after a normal start: a store requests need, a bus they do not, both up. */
function startedReadiness(): Readiness {
  const readiness = new Readiness(RETRY_AFTER);
  readiness.track("cassandra", { neededByRequests: true });
  readiness.track("kafka", { neededByRequests: false });
  readiness.markStarted();
  return readiness;
}

/** Counts live onChange subscriptions, to see that Watch unsubscribes. */
class CountingReadiness extends Readiness {
  listening = 0;
  override onChange(listener: () => void): () => void {
    this.listening++;
    const unsubscribe = super.onChange(listener);
    return () => {
      this.listening--;
      unsubscribe();
    };
  }
}

/** The statuses a grpc-js Watch call has received so far, and how it ended. */
function watch(client: grpc.Client, service: string) {
  const call: grpc.ClientReadableStream<{ status: string }> = (client as any).Watch({ service });
  const statuses: string[] = [];
  const state: { ended: boolean; error?: grpc.ServiceError } = { ended: false };
  call.on("data", (message: { status: string }) => statuses.push(message.status));
  call.on("error", (error: grpc.ServiceError) => (state.error = error));
  call.on("end", () => (state.ended = true));
  const received = (expected: string[], what: string) =>
    eventually(async () => [...statuses], (seen) => seen.length >= expected.length, { timeoutMs: 5_000, what }).then((seen) =>
      assert.deepEqual(seen, expected, what),
    );
  return { call, statuses, state, received };
}

describe("grpc.health.v1.Health on the core port, and the readiness gate", () => {
  let service: TestService;
  const crashes: string[] = [];

  before(async () => {
    service = await startTestService();
  });
  after(async () => {
    await service?.close();
    assert.deepEqual(crashes, [], "no RPC was logged as a crash");
  });

  /** A second core port on the test service's Core, driven by a Readiness the test controls. */
  async function serve(t: TestContext, readiness: Readiness) {
    const rpc = await listenRpc(service.running.core!, "127.0.0.1", 0, (message) => crashes.push(message), readiness);
    const address = `127.0.0.1:${rpc.port}`;
    const health = healthClientAt(address);
    const generation = new (loadGrpcPackage().GenerationService!)(address, grpc.credentials.createInsecure());
    t.after(async () => {
      health.close();
      generation.close();
      await rpc.close();
    });
    return { rpc, address, url: `http://${address}`, health, generation };
  }

  const check = (client: grpc.Client, name: string) => unary<{ status: string }>(client, "Check", { service: name });

  it("when the process is started and its dependencies are up, then Check answers SERVING for the server and every served service", async (t) => {
    const { health } = await serve(t, startedReadiness());
    for (const name of ["", ...SERVICES, "grpc.health.v1.Health"]) {
      assert.deepEqual(await check(health, name), { status: "SERVING" }, `Check(${JSON.stringify(name)})`);
    }
  });

  it("when List is called, then it answers every served name with its status", async (t) => {
    const readiness = new Readiness(RETRY_AFTER);
    const { health } = await serve(t, readiness);
    const listed = await unary<{ statuses: Record<string, { status: string }> }>(health, "List", {});
    const expected: Record<string, { status: string }> = { "": { status: "NOT_SERVING" }, "grpc.health.v1.Health": { status: "SERVING" } };
    for (const name of SERVICES) expected[name] = { status: "NOT_SERVING" };
    assert.deepEqual(listed.statuses, expected);
  });

  it("when a service name is unknown, then Check fails with NOT_FOUND and Watch sends SERVICE_UNKNOWN and stays open", async (t) => {
    const { health } = await serve(t, startedReadiness());
    const error = await rpcError(check(health, "generation.v1.NoSuchService"));
    assert.equal(error.code, grpc.status.NOT_FOUND);

    const watcher = watch(health, "generation.v1.NoSuchService");
    await watcher.received(["SERVICE_UNKNOWN"], "SERVICE_UNKNOWN for an unknown name");
    assert.equal(watcher.state.ended, false, "the call stays open");
    assert.equal(watcher.state.error, undefined);
    watcher.call.cancel();
  });

  it("when the process is still starting, then health is NOT_SERVING and other RPCs fail UNAVAILABLE with service_unavailable and retry-after", async (t) => {
    const readiness = new Readiness(RETRY_AFTER);
    readiness.starting("opening the stores");
    const { health, generation, url } = await serve(t, readiness);
    assert.deepEqual(await check(health, ""), { status: "NOT_SERVING" });
    assert.deepEqual(await check(health, "generation.v1.GenerationService"), { status: "NOT_SERVING" });
    assert.deepEqual(await check(health, "grpc.health.v1.Health"), { status: "SERVING" }, "the health service itself answers");

    const refused = await rpcError(unary(generation, "ListModels", {}));
    assert.equal(refused.code, grpc.status.UNAVAILABLE);
    assert.match(refused.details, /opening the stores/);
    const [detail] = errorDetailOf(refused).details;
    assert.equal(detail?.reason, "service_unavailable");
    assert.equal(detail?.httpStatus, 503);
    assert.equal(detail?.retryAfterSeconds, RETRY_AFTER);

    const connect = createClient(GenerationService, createGrpcTransport({ baseUrl: url }));
    const connectError = await connect.listModels({}).then(
      () => assert.fail("ListModels must be refused while starting"),
      (e: unknown) => ConnectError.from(e),
    );
    assert.equal(connectError.code, Code.Unavailable);
    const [connectDetail] = connectError.findDetails(ErrorDetailSchema);
    assert.equal(connectDetail?.reason, "service_unavailable");
    assert.equal(connectDetail?.retryAfterSeconds, RETRY_AFTER);

    readiness.markStarted();
    assert.deepEqual(await check(health, ""), { status: "SERVING" });
    const listed = await unary(generation, "ListModels", {});
    assert.ok(listed.models.length > 0, "served once started");
  });

  it("when a dependency requests need goes down and comes back, then Watch sends SERVING, NOT_SERVING, SERVING and RPCs are refused meanwhile", async (t) => {
    const readiness = startedReadiness();
    const { health, generation } = await serve(t, readiness);
    const overall = watch(health, "");
    const generationWatch = watch(health, "generation.v1.GenerationService");
    await overall.received(["SERVING"], "the current status at once");
    await generationWatch.received(["SERVING"], "the current status at once (GenerationService)");

    readiness.report("cassandra", "down", "connect ECONNREFUSED");
    await overall.received(["SERVING", "NOT_SERVING"], "NOT_SERVING when the store goes down");
    await generationWatch.received(["SERVING", "NOT_SERVING"], "NOT_SERVING for GenerationService too");
    const refused = await rpcError(unary(generation, "ListModels", {}));
    assert.equal(refused.code, grpc.status.UNAVAILABLE);
    // connect-node percent-encodes grpc-message with encodeURIComponent; grpc-js undoes only decodeURI's part of it.
    assert.match(decodeURIComponent(refused.details), /^cassandra unreachable$/);
    assert.equal(errorDetailOf(refused).details[0]?.retryAfterSeconds, RETRY_AFTER);

    readiness.report("cassandra", "up");
    await overall.received(["SERVING", "NOT_SERVING", "SERVING"], "SERVING again when the store is back");
    await generationWatch.received(["SERVING", "NOT_SERVING", "SERVING"], "SERVING again (GenerationService)");
    const listed = await unary(generation, "ListModels", {});
    assert.ok(listed.models.length > 0);
    overall.call.cancel();
    generationWatch.call.cancel();
  });

  it("when a dependency requests do not need goes down, then health is NOT_SERVING but RPCs are still served", async (t) => {
    const readiness = startedReadiness();
    const { health, generation } = await serve(t, readiness);
    readiness.report("kafka", "down", "broker gone");
    assert.deepEqual(await check(health, ""), { status: "NOT_SERVING" });
    const listed = await unary(generation, "ListModels", {});
    assert.ok(listed.models.length > 0);
  });

  it("when the process drains after SIGTERM, then Watch sends NOT_SERVING while RPCs are still served", async (t) => {
    const readiness = startedReadiness();
    const { health, generation } = await serve(t, readiness);
    const watcher = watch(health, "");
    await watcher.received(["SERVING"], "SERVING before draining");
    readiness.drain();
    await watcher.received(["SERVING", "NOT_SERVING"], "NOT_SERVING once draining");
    assert.deepEqual(await check(health, "generation.v1.TextService"), { status: "NOT_SERVING" });
    const listed = await unary(generation, "ListModels", {});
    assert.ok(listed.models.length > 0, "draining still serves what comes");
    watcher.call.cancel();
  });

  it("when the client cancels a Watch, then the server stops listening to readiness changes", async (t) => {
    const readiness = new CountingReadiness(RETRY_AFTER);
    readiness.markStarted();
    const { health } = await serve(t, readiness);
    const watcher = watch(health, "");
    await watcher.received(["SERVING"], "the current status at once");
    assert.equal(readiness.listening, 1);
    watcher.call.cancel();
    await eventually(async () => readiness.listening, (n) => n === 0, { timeoutMs: 5_000, what: "Watch to unsubscribe" });
    assert.equal(watcher.state.error?.code, grpc.status.CANCELLED);
  });

  it("when the server closes, then open Watch calls get NOT_SERVING and end, and close does not wait for them", async (t) => {
    const readiness = new CountingReadiness(RETRY_AFTER);
    readiness.markStarted();
    const { rpc, health } = await serve(t, readiness);
    const watcher = watch(health, "");
    await watcher.received(["SERVING"], "the current status at once");
    await rpc.close();
    await watcher.received(["SERVING", "NOT_SERVING"], "NOT_SERVING on shutdown");
    await eventually(async () => watcher.state.ended || watcher.state.error !== undefined, Boolean, { timeoutMs: 5_000, what: "Watch to end" });
    assert.equal(watcher.state.error, undefined, "ends with OK");
    assert.equal(readiness.listening, 0);
  });

  describe("with grpc-health-probe", () => {
    it("when serving, then it exits 0, also for -service=generation.v1.GenerationService", async (t) => {
      const probe = goTool("grpc-health-probe");
      const { address } = await serve(t, startedReadiness());
      const overall = await run(probe, [`-addr=${address}`]);
      assert.equal(overall.code, 0, overall.stdout + overall.stderr);
      assert.match(overall.stdout + overall.stderr, /status: SERVING/);
      const one = await run(probe, [`-addr=${address}`, "-service=generation.v1.GenerationService"]);
      assert.equal(one.code, 0, one.stdout + one.stderr);
    });

    it("when not serving (starting, a dependency down), then it exits 4 (unhealthy)", async (t) => {
      const probe = goTool("grpc-health-probe");
      const readiness = new Readiness(RETRY_AFTER);
      const { address } = await serve(t, readiness);
      const starting = await run(probe, [`-addr=${address}`]);
      assert.equal(starting.code, 4, starting.stdout + starting.stderr);
      assert.match(starting.stdout + starting.stderr, /NOT_SERVING/);

      readiness.track("cassandra", { neededByRequests: true });
      readiness.markStarted();
      const up = await run(probe, [`-addr=${address}`, "-service=generation.v1.GenerationService"]);
      assert.equal(up.code, 0, up.stdout + up.stderr);
      readiness.report("cassandra", "down", "connect ECONNREFUSED");
      const down = await run(probe, [`-addr=${address}`, "-service=generation.v1.GenerationService"]);
      assert.equal(down.code, 4, down.stdout + down.stderr);
    });

    it("when the service name is unknown, then it exits non-zero", async (t) => {
      const probe = goTool("grpc-health-probe");
      const { address } = await serve(t, startedReadiness());
      const unknown = await run(probe, [`-addr=${address}`, "-service=generation.v1.NoSuchService"]);
      assert.notEqual(unknown.code, 0, unknown.stdout + unknown.stderr);
      assert.match(unknown.stdout + unknown.stderr, /NotFound|NOT_FOUND/);
    });
  });

  describe("with grpcurl (no reflection: it is given the proto)", () => {
    const grpcurlArgs = (address: string, body?: string) => [
      "-plaintext",
      "-import-path", PROTO_ROOT,
      "-proto", HEALTH_PROTO,
      ...(body ? ["-d", body] : []),
      address,
      "grpc.health.v1.Health/Check",
    ];

    it("when serving, then Check answers SERVING; when a dependency is down, NOT_SERVING", async (t) => {
      const grpcurl = goTool("grpcurl");
      const readiness = startedReadiness();
      const { address } = await serve(t, readiness);
      const serving = await run(grpcurl, grpcurlArgs(address));
      assert.equal(serving.code, 0, serving.stderr);
      assert.deepEqual(JSON.parse(serving.stdout), { status: "SERVING" });

      const one = await run(grpcurl, grpcurlArgs(address, '{"service":"generation.v1.AdminService"}'));
      assert.equal(one.code, 0, one.stderr);
      assert.deepEqual(JSON.parse(one.stdout), { status: "SERVING" });

      readiness.report("cassandra", "down");
      const down = await run(grpcurl, grpcurlArgs(address));
      assert.equal(down.code, 0, down.stderr);
      assert.deepEqual(JSON.parse(down.stdout), { status: "NOT_SERVING" });
    });

    it("when the service name is unknown, then Check fails with NotFound", async (t) => {
      const grpcurl = goTool("grpcurl");
      const { address } = await serve(t, startedReadiness());
      const unknown = await run(grpcurl, grpcurlArgs(address, '{"service":"generation.v1.NoSuchService"}'));
      assert.notEqual(unknown.code, 0);
      assert.match(unknown.stderr, /Code: NotFound/);
    });
  });
});
