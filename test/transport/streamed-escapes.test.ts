// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import type { StagingSession } from "../../src/core/jobs/inline-staging.js";
import { GatewayError } from "../../src/transport/http/gateway-error.js";
import { scanStreamedBody } from "../../src/transport/http/streamed-images.js";
import { createCustomer, jsonOrUndefined, startTestService, type TestService } from "../support/harness.js";

/*
 * The streaming scanner of large JSON bodies (issue 8) is linear in the
 * body, escapes and all: an image's text reaches staging once per chunk
 * however many escapes it has, and what it hands on is exactly what
 * JSON.parse makes of the same text.
 */

const MB = 1_000_000;

/** A staging session that keeps each image's text and counts the pieces it was handed in. */
function recordingSession() {
  const uploads: { text: string; feeds: number }[] = [];
  const session: StagingSession = {
    open() {
      const upload = { text: "", feeds: 0 };
      uploads.push(upload);
      return {
        async feed(text) {
          upload.text += text;
          upload.feeds++;
        },
        async finish() {
          return { ref: `r${uploads.length}`, mimeType: "text/plain", decodedBytes: upload.text.length, digest: "", head: new Uint8Array(0) };
        },
        async abort() {},
      };
    },
    async discard() {},
  };
  return { session, uploads };
}

/** `body` in chunks of the given sizes (cycled). */
async function* inChunks(body: Buffer, sizes: readonly number[]) {
  for (let at = 0, turn = 0; at < body.length; turn++) {
    const size = sizes[turn % sizes.length]!;
    yield body.subarray(at, at + size);
    at += size;
  }
}

const chunkCount = (length: number, size: number) => Math.ceil(length / size);

/** Scans `json` in chunks; what staging received and the rest of the body, parsed. */
async function scan(json: string, sizes: readonly number[], maxOtherBytes = 64 * MB) {
  const { session, uploads } = recordingSession();
  const body = Buffer.from(json);
  const scanned = await scanStreamedBody(inChunks(body, sizes), session, { maxBytes: body.length, maxOtherBytes });
  return { uploads, rest: JSON.parse(scanned.rest.toString("utf8")) as Record<string, unknown>, imageFields: scanned.imageFields };
}

/** The refusal of a scan, as "STATUS reason", or "accepted". */
async function refusalOf(json: string, sizes: readonly number[]): Promise<string> {
  try {
    await scan(json, sizes);
    return "accepted";
  } catch (error) {
    if (error instanceof GatewayError) return `${error.status} ${error.reason}`;
    throw error;
  }
}

describe("streamed bodies are scanned in linear time, escapes and all", () => {
  it("when an image string is 5 MB of \\u0041 and \\/ escapes, then staging gets its unescaped text in one piece per chunk", async (t) => {
    const raw = "\\u0041\\/AB".repeat(Math.ceil((5 * MB) / 10));
    const json = `{"model":"m","input_images_base64":["${raw}","QUJD"]}`;
    const started = performance.now();
    const { uploads, rest } = await scan(json, [65536]);
    const elapsed = performance.now() - started;
    t.diagnostic(`${(json.length / MB).toFixed(1)} MB with ${(raw.length / 10) * 2} escapes in an image scanned in ${elapsed.toFixed(0)} ms`);
    assert.equal(uploads.length, 2);
    assert.equal(uploads[0]!.text, JSON.parse(`"${raw}"`));
    assert.ok(uploads[0]!.feeds <= chunkCount(json.length, 65536), `${uploads[0]!.feeds} pieces for ${chunkCount(json.length, 65536)} chunks`);
    assert.equal(uploads[1]!.text, "QUJD");
    assert.deepEqual(rest, { model: "m", input_images_base64: ["", ""] });
  });

  it("when a string field besides the images holds 5 MB of \\\" \\\\ and \\u0041 escapes, then the rest of the body is kept exactly", async (t) => {
    const raw = '\\"\\\\\\u0041x'.repeat(Math.ceil((5 * MB) / 11));
    const json = `{"note":"${raw}","input_images_base64":["QUJD"],"inp\\u0075t":"${raw}"}`;
    const started = performance.now();
    const { uploads, rest } = await scan(json, [65536]);
    const elapsed = performance.now() - started;
    t.diagnostic(`${(json.length / MB).toFixed(1)} MB of escapes besides the images scanned in ${elapsed.toFixed(0)} ms`);
    assert.deepEqual(uploads.map((upload) => upload.text), ["QUJD"]);
    assert.deepEqual(rest, { ...JSON.parse(json), input_images_base64: [""] });
  });

  it("when a chunk boundary falls anywhere, even inside an escape or a key, then the result is what JSON.parse reads", async () => {
    const json = `{"a\\"":"x\\\\","inp\\u0075t_images_base64":["QU\\u004aD\\/\\n\\r\\t","\\u0051UJD"],"m":{"input_images_base64":["\\""]}}`;
    const expected = JSON.parse(json);
    for (const size of [1, 2, 3, 5, 7, 11]) {
      const { uploads, rest, imageFields } = await scan(json, [size]);
      assert.deepEqual(uploads.map((upload) => upload.text), expected.input_images_base64, `chunks of ${size}`);
      assert.deepEqual(rest, { ...expected, input_images_base64: ["", ""] }, `chunks of ${size}`);
      assert.deepEqual(imageFields, ["input_images_base64"]);
    }
  });

  it("when an image string has an escape JSON does not allow or an unescaped control character, then 400 invalid_json wherever the chunks end", async () => {
    for (const bad of ["\\q", "\\u00zz", "\\u12", "\\x41", "\n", "\t", "\u0000", "\\"]) {
      const json = `{"input_images_base64":["QU${bad}JD"]}`;
      for (const size of [1, 3, 64]) assert.equal(await refusalOf(json, [size]), "400 invalid_json", `${JSON.stringify(bad)} in chunks of ${size}`);
    }
  });

  it("when the image field is named twice, under any spelling, then 422 validation_failed as soon as the second name arrives", async () => {
    const escaped = [..."input_images_base64"].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
    for (const [first, second] of [
      ["input_images_base64", "input_images_base64"], ["input_images_base64", escaped], ["inputImagesBase64", "input_images_base64"],
    ] as const) {
      const json = `{"${first}":null,"model":"m","${second}":["QUJD"]}`;
      for (const size of [1, 4, 64]) assert.equal(await refusalOf(json, [size]), "422 validation_failed", `${first} / ${second} in chunks of ${size}`);
    }
  });

  it("when a key only resembles the image field, or the field is not at the top level, then its strings stay in the body", async () => {
    const json = `{"input_images_base64x":["a"],"xinput_images_base64":["b"],"m":{"input_images_base64":["c"]},"l":[{"input_images_base64":["d"]}]}`;
    const { uploads, rest } = await scan(json, [5]);
    assert.deepEqual(uploads, []);
    assert.deepEqual(rest, JSON.parse(json));
  });
});

describe("streamed bodies with megabytes of escapes over HTTP", () => {
  let service: TestService;
  before(async () => {
    service = await startTestService({ LARGE_UPLOAD_BYTES: "64KiB", MAX_INPUT_BYTES: "8MiB" });
  });
  after(() => service.close());

  /** POSTs `body` chunked (so it is streamed), 64 KiB at a time. */
  function post(key: string, body: string): Promise<{ status: number; text: string }> {
    const url = new URL("/api/v1/generations", service.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on("error", reject);
      });
      req.on("error", reject);
      const bytes = Buffer.from(body);
      for (let at = 0; at < bytes.length; at += 65536) req.write(bytes.subarray(at, at + 65536));
      req.end();
    });
  }

  it("when an image is sent as 5 MB of \\u0041 escapes and an ignored field holds 5 MB of \\\" and \\\\, then 202 and the image is exactly the decoded text", async (t) => {
    const customer = await createCustomer(service, "50.00");
    const letters = Math.ceil((5 * MB) / 6 / 4) * 4; // whole base64 quanta of "A"
    const noise = '\\"\\\\'.repeat((5 * MB) / 4);
    const body = `{"model":"aimodel-3-pro-image","prompt":"[simulate:fail]","aspect_ratio":"1:1","resolution":"1K","note":"${noise}",` +
      `"input_images_base64":["${"\\u0041".repeat(letters)}"]}`;
    const started = performance.now();
    const created = await post(customer.apiKey, body);
    const elapsed = performance.now() - started;
    t.diagnostic(`${(body.length / MB).toFixed(1)} MB of escapes answered ${created.status} in ${elapsed.toFixed(0)} ms`);
    assert.equal(created.status, 202, created.text.slice(0, 300));
    const jobId = jsonOrUndefined(created.text).job_id as string;
    const stored = await service.running.core!.deps.blobs.read(`inputs/${jobId}/0`);
    assert.ok(Buffer.from(stored!.bytes).equals(Buffer.from("A".repeat(letters), "base64")));
  });
});
