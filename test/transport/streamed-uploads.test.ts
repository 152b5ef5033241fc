// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { Readable } from "node:stream";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { balanceOf, createCustomer, finishedJob, jsonOrUndefined, startTestService, type TestService } from "../support/harness.js";
import { assertPlatformError, tinyPng } from "../support/jobs-api-helpers.js";

/*
 * Large requests' inline images are decoded into the blob store while the
 * body arrives (issue 8): never held whole in memory, byte for byte the same
 * as sent, and nothing left behind by a refused or abandoned request.
 */

const MIB = 1024 * 1024;
/** The simulator fails prompts with this marker at once: accepted jobs render nothing in the background. */
const MARKER = "[simulate:fail]";

/** A PNG followed by `padding` bytes: a large but valid-looking image. */
const largeImage = (padding: number) => Buffer.concat([tinyPng(32, 32), Buffer.alloc(padding, 0x5a)]);

/** Files waiting in the blob store's staging area (none once every request has ended). */
function stagedFiles(service: TestService): string[] {
  const staging = join(service.dataDir, "blobs", "staging");
  return existsSync(staging) ? readdirSync(staging) : [];
}

interface Sent {
  readonly status: number;
  readonly json: any;
  readonly text: string;
}

/**
 * POSTs a JSON body written in pieces by `parts` (so the client never holds
 * it whole), with Content-Length when `length` is given, chunked otherwise.
 */
function postStreamed(service: TestService, key: string, parts: () => AsyncIterable<string | Buffer>, options: { length?: number; headers?: Record<string, string> } = {}): Promise<Sent> {
  const url = new URL("/api/v1/generations", service.url);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${key}`, "content-type": "application/json", ...options.headers };
    if (options.length !== undefined) headers["content-length"] = options.length;
    const req = httpRequest(url, { method: "POST", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode ?? 0, json: jsonOrUndefined(text), text });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    Readable.from(parts()).on("error", reject).pipe(req);
  });
}

/** The body of an image job whose inline images are given as base64 texts, each produced in pieces. */
function jobBody(images: readonly Buffer[], fields: Record<string, unknown> = {}) {
  const head = JSON.stringify({ model: "aimodel-3-pro-image", prompt: "restyle these", aspect_ratio: "1:1", resolution: "1K", ...fields }).slice(0, -1);
  const pieces = async function* () {
    yield `${head},"input_images_base64":[`;
    for (const [index, image] of images.entries()) {
      if (index > 0) yield ",";
      yield '"data:image/png;base64,';
      // 3-byte-aligned slices keep each piece's base64 independent; JSON escapes '/' as the vendor's SDKs may.
      for (let at = 0; at < image.length; at += 3 * 65536) yield image.subarray(at, at + 3 * 65536).toString("base64").replaceAll("/", "\\/");
      yield '"';
    }
    yield "]}";
  };
  let length = 0;
  return {
    pieces,
    async length() {
      if (!length) for await (const piece of pieces()) length += Buffer.byteLength(piece);
      return length;
    },
  };
}

describe("large inline images, streamed to the blob store", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ LARGE_UPLOAD_BYTES: "64KiB", MAX_INPUT_BYTES: "8MiB" });
  });
  after(() => service.close());

  it("when a large request carries inline images, then the job's inputs are exactly the images sent and nothing stays staged", async () => {
    const customer = await createCustomer(service, "50.00");
    const images = [largeImage(2 * MIB + 1), largeImage(100_000)];
    const body = jobBody(images);
    const created = await postStreamed(service, customer.apiKey, body.pieces, { length: await body.length() });
    assert.equal(created.status, 202, created.text);
    const jobId = created.json.job_id as string;
    for (const [index, image] of images.entries()) {
      const stored = await service.running.core!.deps.blobs.read(`inputs/${jobId}/${index}`);
      assert.equal(stored?.contentType, "image/png");
      assert.ok(Buffer.from(stored!.bytes).equals(image), `input ${index} differs from what was sent`);
    }
    assert.deepEqual(stagedFiles(service), []);
    assert.equal((await finishedJob(service, customer.apiKey, jobId)).status, "done");
  });

  it("when a chunked request (no Content-Length) carries images, then it is streamed the same way", async () => {
    const customer = await createCustomer(service, "50.00");
    const image = largeImage(MIB);
    const created = await postStreamed(service, customer.apiKey, jobBody([image]).pieces);
    assert.equal(created.status, 202, created.text);
    const stored = await service.running.core!.deps.blobs.read(`inputs/${created.json.job_id}/0`);
    assert.ok(Buffer.from(stored!.bytes).equals(image));
  });

  it("when a streamed image is not base64, then 422 invalid_input_image, no money moves and nothing stays staged", async () => {
    const customer = await createCustomer(service, "50.00");
    const before = await balanceOf(service, customer.apiKey);
    const pieces = async function* () {
      yield '{"model":"aimodel-3-pro-image","prompt":"x","aspect_ratio":"1:1","resolution":"1K","input_images_base64":["';
      yield Buffer.alloc(200_000, 0x41).toString();
      yield '!!not base64!!"]}';
    };
    const refused = await postStreamed(service, customer.apiKey, pieces);
    assertPlatformError({ ...refused, headers: new Headers() }, 422, "invalid_input_image");
    assert.deepEqual(await balanceOf(service, customer.apiKey), before);
    assert.deepEqual(stagedFiles(service), []);
  });

  it("when the images together exceed MAX_INPUT_BYTES, then 422 input_too_large and nothing stays staged", async () => {
    const customer = await createCustomer(service, "50.00");
    const refused = await postStreamed(service, customer.apiKey, jobBody([largeImage(5 * MIB), largeImage(5 * MIB)]).pieces);
    assertPlatformError({ ...refused, headers: new Headers() }, 422, "input_too_large");
    assert.deepEqual(stagedFiles(service), []);
  });

  it("when the fields besides the images are larger than 6 × (largest prompt + metadata limit) + MAX_BODY_BYTES, then 422 input_too_large naming that budget", async () => {
    const customer = await createCustomer(service, "50.00");
    // 6 × (1 MiB + 16 KiB) + 1 MiB = 7.1 MiB; the route itself takes 4·⌈8 MiB/3⌉ more.
    const refused = await postStreamed(service, customer.apiKey, jobBody([largeImage(10)], { note: "n".repeat(8 * MIB) }).pieces);
    assertPlatformError({ ...refused, headers: new Headers() }, 422, "input_too_large");
    assert.match(refused.json.error.message, /besides input_images_base64 are larger than 7\.1 MiB/);
    assert.deepEqual(stagedFiles(service), []);
  });

  it("when a streamed text job has a prompt at the 1 MiB limit, even fully escaped (6 MiB of JSON), then 202 as parsed whole", async () => {
    const customer = await createCustomer(service, "100000.00");
    for (const fill of ["x", "\u0001"]) {
      const prompt = MARKER + fill.repeat(MIB - MARKER.length);
      const text = JSON.stringify({ model: "aimodel-3.5-flash", prompt, note: "n".repeat(64 * 1024) });
      const pieces = async function* () {
        for (let at = 0; at < text.length; at += 65536) yield text.slice(at, at + 65536);
      };
      const created = await postStreamed(service, customer.apiKey, pieces);
      assert.equal(created.status, 202, `${JSON.stringify(fill)}: ${created.text.slice(0, 300)}`);
    }
  });

  it("when a streamed request is retried over gRPC with the same Idempotency-Key and inline base64, then it is the same request: one job", async () => {
    const customer = await createCustomer(service, "50.00");
    const image = largeImage(300_000);
    const key = randomUUID();
    const created = await postStreamed(service, customer.apiKey, jobBody([image]).pieces, { headers: { "idempotency-key": key } });
    assert.equal(created.status, 202, created.text);
    const client = createClient(GenerationService, createGrpcTransport({ baseUrl: service.grpcUrl }));
    const retried = await client.createGeneration(
      {
        model: "aimodel-3-pro-image", prompt: "restyle these", aspectRatio: "1:1", resolution: "1K", idempotencyKey: key,
        inputImagesBase64: [`data:image/png;base64,${image.toString("base64")}`],
      },
      { headers: { authorization: `Bearer ${customer.apiKey}` } },
    );
    assert.equal(retried.jobId, created.json.job_id);
    assert.equal(retried.replayed, true);
  });

  it("when a 150 MiB image is uploaded, then the process's heap never holds it", async () => {
    const big = await startTestService({ LARGE_UPLOAD_BYTES: "64KiB", MAX_INPUT_BYTES: "200MiB" });
    try {
      const bigCustomer = await createCustomer(big, "50.00");
      const size = 150 * MIB;
      const pieces = async function* () {
        yield '{"model":"aimodel-3-pro-image","prompt":"x","aspect_ratio":"1:1","resolution":"1K","input_images_base64":["';
        const block = Buffer.alloc(3 * 65536, 0x33).toString("base64");
        for (let sent = 0; sent < size; sent += 3 * 65536) yield block;
        yield '"]}';
      };
      global.gc?.();
      const baseline = process.memoryUsage().heapUsed;
      let peak = baseline;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 10);
      try {
        const created = await postStreamed(big, bigCustomer.apiKey, pieces);
        assert.equal(created.status, 202, created.text);
      } finally {
        clearInterval(sampler);
      }
      const growth = (peak - baseline) / MIB;
      // Parsed whole, the text alone (200 MiB of base64) would be on the heap, twice.
      assert.ok(growth < 64, `the heap grew by ${growth.toFixed(0)} MiB during a 150 MiB upload`);
    } finally {
      await big.close();
    }
  });
});
