// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { createCustomer, jsonOrUndefined, startTestService, type TestService } from "../support/harness.js";
import { tinyPng } from "../support/jobs-api-helpers.js";

/*
 * A generation body gives the same answer whether it is parsed whole (small
 * bodies) or scanned as it arrives with its inline images streamed to the
 * blob store (large ones): the same JSON rules, the same refusals. Two
 * services differ only in LARGE_UPLOAD_BYTES: one streams every body, the
 * other parses every body whole.
 */

/** Limits small enough that an image of a few hundred KiB is more than the fields besides the images may take. */
const LIMITS = {
  MAX_BODY_BYTES: "64KiB",
  MAX_PROMPT_BYTES_IMAGE: "8KiB",
  MAX_PROMPT_BYTES_VIDEO: "8KiB",
  MAX_PROMPT_BYTES_TEXT: "8KiB",
};

/** The simulator fails prompts with this marker at once: accepted jobs render nothing in the background. */
const MARKER = "[simulate:fail]";
const HEAD = `{"model":"aimodel-3-pro-image","prompt":"${MARKER}","aspect_ratio":"1:1","resolution":"1K"`;
/** A small PNG, and one larger than the fields besides the images may take (6 × (8 + 16) KiB + 64 KiB). */
const SMALL = tinyPng(8, 8).toString("base64");
const LARGE = Buffer.concat([tinyPng(16, 16), Buffer.alloc(300 * 1024, 0x5a)]).toString("base64");

interface Row {
  readonly name: string;
  /** The body's fields after the common ones (model, prompt, aspect ratio, resolution), as raw JSON text. */
  readonly rest: string;
  /** "202", or "STATUS code". */
  readonly expected: string;
}

const ROWS: readonly Row[] = [
  { name: "one image", rest: `,"input_images_base64":["${SMALL}"]}`, expected: "202" },
  { name: "a large image", rest: `,"input_images_base64":["${LARGE}"]}`, expected: "202" },
  { name: "a large image under an escaped key", rest: `,"inp\\u0075t_images_base64":["${LARGE}"]}`, expected: "202" },
  { name: "a large image under a fully escaped key", rest: `,"${[..."input_images_base64"].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")}":["${LARGE}"]}`, expected: "202" },
  { name: "a large image under the lowerCamelCase name", rest: `,"inputImagesBase64":["${LARGE}"]}`, expected: "202" },
  { name: "an image whose '/' and letters are escaped", rest: `,"input_images_base64":["${SMALL.replaceAll("/", "\\/").replace("A", "\\u0041")}"]}`, expected: "202" },
  { name: "an image with escaped whitespace", rest: `,"input_images_base64":["${SMALL.slice(0, 8)}\\n\\t${SMALL.slice(8)}"]}`, expected: "202" },
  { name: "no images (null)", rest: `,"input_images_base64":null}`, expected: "202" },
  { name: "no images (empty array)", rest: `,"input_images_base64":[]}`, expected: "202" },
  { name: "the image field inside metadata", rest: `,"metadata":{"input_images_base64":["x"]}}`, expected: "202" },
  { name: "a null after an image", rest: `,"input_images_base64":["${SMALL}",null]}`, expected: "422 validation_failed" },
  { name: "only a null", rest: `,"input_images_base64":[null]}`, expected: "422 validation_failed" },
  { name: "a number after an image", rest: `,"input_images_base64":["${SMALL}",5]}`, expected: "422 validation_failed" },
  { name: "a nested array", rest: `,"input_images_base64":[["${SMALL}"]]}`, expected: "422 validation_failed" },
  { name: "a string instead of an array", rest: `,"input_images_base64":"${SMALL}"}`, expected: "422 validation_failed" },
  { name: "an empty image", rest: `,"input_images_base64":[""]}`, expected: "422 invalid_input_image" },
  { name: "an image of padding only", rest: `,"input_images_base64":["="]}`, expected: "422 invalid_input_image" },
  { name: "an image with padding after a whole quantum", rest: `,"input_images_base64":["${SMALL.replace(/=+$/, "").slice(0, 8)}=="]}`, expected: "422 invalid_input_image" },
  { name: "an invalid escape in an image", rest: `,"input_images_base64":["${SMALL.slice(0, 8)}\\q${SMALL.slice(8)}"]}`, expected: "400 invalid_json" },
  { name: "a \\u escape without four hex digits in an image", rest: `,"input_images_base64":["${SMALL.slice(0, 8)}\\u00zz${SMALL.slice(8)}"]}`, expected: "400 invalid_json" },
  { name: "a raw newline in an image", rest: `,"input_images_base64":["${SMALL.slice(0, 8)}\n${SMALL.slice(8)}"]}`, expected: "400 invalid_json" },
  { name: "a raw tab in an image", rest: `,"input_images_base64":["${SMALL.slice(0, 8)}\t${SMALL.slice(8)}"]}`, expected: "400 invalid_json" },
  { name: "a trailing comma after an image", rest: `,"input_images_base64":["${SMALL}",]}`, expected: "400 invalid_json" },
  { name: "a body that ends inside an image", rest: `,"input_images_base64":["${SMALL}`, expected: "400 invalid_json" },
  { name: "a __proto__ key", rest: `,"__proto__":{"x":1},"input_images_base64":["${SMALL}"]}`, expected: "400 invalid_json" },
  { name: "the image field twice", rest: `,"input_images_base64":["${SMALL}"],"input_images_base64":["${SMALL}"]}`, expected: "422 validation_failed" },
  { name: "the image field twice, once escaped", rest: `,"input_images_base64":["${SMALL}"],"input\\u005fimages_base64":["${SMALL}"]}`, expected: "422 validation_failed" },
  { name: "the image field twice, the first null", rest: `,"input_images_base64":null,"input_images_base64":["${LARGE}"]}`, expected: "422 validation_failed" },
  { name: "the image field under both names", rest: `,"input_images_base64":["${SMALL}"],"inputImagesBase64":["${SMALL}"]}`, expected: "422 validation_failed" },
];

/** Files waiting in the blob store's staging area (none once every request has ended). */
function stagedFiles(service: TestService): string[] {
  const staging = join(service.dataDir, "blobs", "staging");
  return existsSync(staging) ? readdirSync(staging) : [];
}

/** POSTs raw JSON text with its Content-Length; the answer's status and error code ("202" when accepted). */
function outcome(service: TestService, key: string, body: string): Promise<string> {
  const url = new URL("/api/v1/generations", service.url);
  const bytes = Buffer.from(body);
  return new Promise((resolve, reject) => {
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": bytes.length };
    const req = httpRequest(url, { method: "POST", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const json = jsonOrUndefined(Buffer.concat(chunks).toString());
        resolve(res.statusCode === 202 ? "202" : `${res.statusCode} ${json?.error?.code}`);
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(bytes);
  });
}

describe("generation bodies parsed whole and streamed give the same answers", () => {
  let streamed: TestService;
  let whole: TestService;
  let streamedKey: string;
  let wholeKey: string;
  before(async () => {
    [streamed, whole] = await Promise.all([
      startTestService({ ...LIMITS, LARGE_UPLOAD_BYTES: "1" }),
      startTestService({ ...LIMITS, LARGE_UPLOAD_BYTES: "64MiB" }),
    ]);
    [streamedKey, wholeKey] = (await Promise.all([createCustomer(streamed, "500.00"), createCustomer(whole, "500.00")])).map((c) => c.apiKey);
  });
  after(() => Promise.all([streamed?.close(), whole?.close()]));

  for (const row of ROWS) {
    it(`when the body has ${row.name}, then both paths answer ${row.expected}`, async () => {
      const body = HEAD + row.rest;
      const [viaStream, viaWhole] = [await outcome(streamed, streamedKey, body), await outcome(whole, wholeKey, body)];
      assert.deepEqual({ streamed: viaStream, whole: viaWhole }, { streamed: row.expected, whole: row.expected });
      assert.deepEqual(stagedFiles(streamed), []);
    });
  }
});
