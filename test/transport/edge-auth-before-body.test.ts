// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { ADMIN_TOKEN, startTestService, type TestService } from "../support/harness.js";
import { startProcess, type ServiceProcess } from "../support/processes.js";
import { bearer, grpcAddress } from "../support/rpc-helpers.js";
import { connectErrorOf, connectH2, envelope, grpcStatusOf, grpcWebStatusOf, rawCall, rawGrpcUnary, type RawAnswer } from "./edge-helpers.js";
import { coreUrlIn } from "../support/service-output.js";

const CREATE_ACCOUNT = "/generation.v1.AdminService/CreateAccount";
const CREATE_GENERATION = "/generation.v1.GenerationService/CreateGeneration";
const MB = 1024 * 1024;
const ANNOUNCED = 300 * MB;
/** What each hostile call actually sends before it waits: far less than it announces. */
const SENT = Buffer.alloc(64 * 1024, 7);

/** Rejects when `promise` takes longer than `ms` (a call the server never answers fails the test instead of hanging it). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)));
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

describe("the core checks credentials from the headers before it reads a message", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService();
  });
  after(() => service?.close());

  /** A call that announces a 300 MB message, sends 64 KiB of it and keeps its request open. */
  async function hostile(path: string, headers: Record<string, string>, enveloped: boolean): Promise<RawAnswer> {
    const session = connectH2(service.grpcUrl);
    try {
      const first = enveloped ? envelope(SENT, 0, ANNOUNCED) : SENT;
      return await within(rawCall(session, path, headers, [first], false), 5_000, `${headers["content-type"]} ${path}`);
    } finally {
      session.destroy();
    }
  }

  it("when a gRPC call has no admin token, then it gets UNAUTHENTICATED with its ErrorDetail at once and the request side is closed", async () => {
    const answer = await hostile(CREATE_ACCOUNT, { "content-type": "application/grpc", te: "trailers" }, true);
    assert.equal(answer.status, 200);
    const status = grpcStatusOf(answer);
    assert.equal(status.code, grpc.status.UNAUTHENTICATED, JSON.stringify(status));
    assert.equal(status.details[0]?.reason, "invalid_admin_token");
    assert.equal(status.details[0]?.httpStatus, 401);
    assert.equal(answer.rstCode, 0, "RST_STREAM NO_ERROR after the status: the sender stops");
  });

  it("when a gRPC-Web call has no API key, then its trailer frame carries UNAUTHENTICATED", async () => {
    const answer = await hostile(CREATE_GENERATION, { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" }, true);
    assert.equal(answer.status, 200);
    const status = grpcWebStatusOf(answer);
    assert.equal(status.code, grpc.status.UNAUTHENTICATED, JSON.stringify(status));
    assert.equal(status.details[0]?.reason, "missing_api_key");
  });

  it("when a Connect call has an invalid API key, then it gets HTTP 401 with Connect's JSON error and the ErrorDetail", async () => {
    const answer = await hostile(CREATE_GENERATION, {
      "content-type": "application/proto",
      "connect-protocol-version": "1",
      "content-length": String(ANNOUNCED),
      authorization: "Bearer sk-not-a-key",
    }, false);
    assert.equal(answer.status, 401, answer.body.toString());
    const error = connectErrorOf(JSON.parse(answer.body.toString("utf8")));
    assert.equal(error.code, "unauthenticated");
    assert.equal(error.details[0]?.reason, "invalid_api_key");
    assert.equal(error.details[0]?.httpStatus, 401);
  });

  it("when the credentials are valid, then the message is read and the call served as before", async () => {
    const pkg = (await import("../support/rpc-helpers.js")).loadGrpcPackage();
    const admin = new pkg.AdminService!(grpcAddress(service.grpcUrl), grpc.credentials.createInsecure());
    try {
      const created = await new Promise<any>((resolve, reject) =>
        (admin as any).CreateAccount({ name: "edge", balance: "1.00" }, bearer(ADMIN_TOKEN), (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r))),
      );
      assert.equal(created.balance.balance, "1.00");
    } finally {
      admin.close();
    }
  });
});

/** A well-formed CreateAccountRequest of `total` bytes: field 1 (name), a string of "a"s. */
function nameOf(total: number): Buffer {
  const varint: number[] = [];
  let length = total - 6;
  while (length >= 0x80) {
    varint.push((length & 0x7f) | 0x80);
    length = Math.floor(length / 0x80);
  }
  varint.push(length);
  const message = Buffer.alloc(1 + varint.length + (total - 6), 0x61);
  message[0] = 0x0a;
  Buffer.from(varint).copy(message, 1);
  return message;
}

/** VmRSS and VmHWM (peak) of a process, in bytes, from /proc. */
async function memoryOf(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

describe("unauthenticated 300 MB CreateAccount messages against a separate service process", () => {
  let dataDir: string;
  let server: ServiceProcess;
  let grpcUrl: string;
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "edge-auth-"));
    server = await startProcess({ DATA_DIR: dataDir, LOG_LEVEL: "silent" });
    grpcUrl = coreUrlIn(server.output());
    assert.ok(grpcUrl, server.output());
  });
  after(async () => {
    await server?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("when three arrive at once over grpc-js, then each is refused UNAUTHENTICATED within seconds and the server's memory does not grow by their size", async () => {
    const client = new grpc.Client(grpcAddress(grpcUrl), grpc.credentials.createInsecure());
    try {
      // Warm the path up (first call, first session) so the measure is of the attack only.
      const warm = await rawGrpcUnary(client, CREATE_ACCOUNT, Buffer.alloc(0));
      assert.equal(warm.error?.code, grpc.status.UNAUTHENTICATED);
      const beforeAttack = await memoryOf(server.child.pid!);

      const message = nameOf(ANNOUNCED);
      const results = await Promise.all([1, 2, 3].map(() => rawGrpcUnary(client, CREATE_ACCOUNT, message, bearer("not-the-admin-token"))));
      const afterAttack = await memoryOf(server.child.pid!);

      for (const { error, ms } of results) {
        assert.equal(error?.code, grpc.status.UNAUTHENTICATED, `${error?.code} ${error?.details}`);
        assert.ok(ms < 10_000, `refused in ${ms} ms`);
      }
      const grewBy = afterAttack.peak - beforeAttack.rss;
      console.log(
        `# edge memory: RSS before ${(beforeAttack.rss / MB).toFixed(0)} MB, peak during 3 x 300 MB unauthenticated ` +
          `CreateAccount ${(afterAttack.peak / MB).toFixed(0)} MB (+${(grewBy / MB).toFixed(1)} MB), RSS after ` +
          `${(afterAttack.rss / MB).toFixed(0)} MB; refused in ${results.map((r) => r.ms).join(", ")} ms`,
      );
      assert.ok(grewBy < 64 * MB, `the server's peak RSS grew by ${(grewBy / MB).toFixed(0)} MB`);
    } finally {
      client.close();
    }
  });
});
