// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { BACKEND, call, createCustomer, startTestService, type TestService } from "../support/harness.js";
import { assertBalance, assertVendorError, FRESH_BALANCE } from "../support/jobs-api-helpers.js";
import { VENDOR } from "../support/vendor-helpers.js";
import { startVendorStub, type VendorStub } from "../support/vendor-stub.js";

/*
 * What the synchronous text API forwards upstream besides the text of its
 * parts is bounded too (review finding 14): the allow-listed generationConfig
 * (responseSchema, stopSequences, …) counts, as JSON, together with the text
 * of contents and systemInstruction against MAX_PROMPT_BYTES_TEXT, and is
 * refused over it as the prompt limit is (400 INVALID_ARGUMENT,
 * PROMPT_TOO_LONG, in the vendor's shape), before anything is held or sent;
 * a content's role is "user" or "model", an inline part's media type at most
 * 255 characters (400 UNSUPPORTED_FIELD otherwise). Through the vendor HTTP
 * surface, with the vendor stub as the upstream so that "nothing was sent"
 * is seen.
 */

const LIMIT = 80;
const MODEL = "aimodel-3.5-flash";
const ACTIONS = [":generateContent", ":streamGenerateContent?alt=sse", ":streamGenerateContent"];

/** Bytes of the generationConfig as the service reads it (its JSON). */
const configBytes = (config: unknown) => Buffer.byteLength(JSON.stringify(config));

describe(`forwarded fields count against the text prompt limit (MAX_PROMPT_BYTES_TEXT=${LIMIT}, ${BACKEND} backend)`, () => {
  let stub: VendorStub;
  let service: TestService;
  before(async () => {
    stub = await startVendorStub();
    service = await startTestService({ VENDOR_BASE_URL: stub.url, VENDOR_API_KEY: stub.apiKey, MAX_PROMPT_BYTES_TEXT: String(LIMIT) });
  });
  after(async () => {
    await service?.close();
    await stub?.close();
  });

  const generate = (key: string, action: string, body: unknown) => call(service, "POST", `${VENDOR}/models/${MODEL}${action}`, { vendorKey: key, body });
  const sentUpstream = (mark: number) => stub.requests.slice(mark).filter((r) => r.model === MODEL).length;

  const over: { name: string; config: Record<string, unknown> }[] = [
    { name: "a responseSchema", config: { responseMimeType: "application/json", responseSchema: { type: "OBJECT", description: "d".repeat(LIMIT) } } },
    { name: "stopSequences", config: { stopSequences: ["s".repeat(40), "t".repeat(40)] } },
  ];
  for (const { name, config } of over) {
    for (const action of ACTIONS) {
      it(`when ${name} takes a short prompt over the limit, then ${action} answers 400 INVALID_ARGUMENT PROMPT_TOO_LONG in the vendor's shape, nothing is held and nothing is sent`, async () => {
        const customer = await createCustomer(service);
        const mark = stub.requests.length;
        const response = await generate(customer.apiKey, action, {
          contents: [{ role: "user", parts: [{ text: "Name a colour" }] }],
          generationConfig: config,
        });
        assertVendorError(response, 400, "INVALID_ARGUMENT", "PROMPT_TOO_LONG");
        assert.equal(
          response.json.error.message,
          `the text of contents and systemInstruction with generationConfig is longer than ${LIMIT} bytes of UTF-8, the limit for text models`,
        );
        assert.equal(sentUpstream(mark), 0, "nothing reached the upstream");
        await assertBalance(service, customer.apiKey, FRESH_BALANCE);
      });
    }
  }

  it("when the text and the generationConfig together are exactly at the limit, then 200; one byte more, then 400 PROMPT_TOO_LONG", async () => {
    const customer = await createCustomer(service);
    const config = { stopSequences: ["END"], responseMimeType: "text/plain" };
    const room = LIMIT - configBytes(config) - "sys".length;
    assert.ok(room > 10, `room for text: ${room}`);
    const body = (textBytes: number) => ({
      systemInstruction: { parts: [{ text: "sys" }] },
      contents: [{ role: "user", parts: [{ text: "a".repeat(textBytes) }] }],
      generationConfig: config,
    });
    const mark = stub.requests.length;
    const at = await generate(customer.apiKey, ":generateContent", body(room));
    assert.equal(at.status, 200, at.text);
    assert.equal(sentUpstream(mark), 1);
    const beyond = await generate(customer.apiKey, ":generateContent", body(room + 1));
    assertVendorError(beyond, 400, "INVALID_ARGUMENT", "PROMPT_TOO_LONG");
    assert.equal(sentUpstream(mark), 1, "the refused request was not sent");
  });

  it("when a content's role is neither user nor model (a long string), then 400 UNSUPPORTED_FIELD naming it, and nothing is held or sent", async () => {
    const customer = await createCustomer(service);
    const mark = stub.requests.length;
    const response = await generate(customer.apiKey, ":generateContent", {
      contents: [{ role: "r".repeat(100_000), parts: [{ text: "Name a colour" }] }],
    });
    assertVendorError(response, 400, "INVALID_ARGUMENT", "UNSUPPORTED_FIELD");
    assert.match(response.json.error.message, /^contents\[0\]\.role /);
    assert.ok(response.text.length < 1_000, "the answer does not echo the role");
    assert.equal(sentUpstream(mark), 0);
    await assertBalance(service, customer.apiKey, FRESH_BALANCE);
  });

  it("when an inline part's media type is longer than 255 characters, then 400 UNSUPPORTED_FIELD naming it, and nothing is held or sent", async () => {
    const customer = await createCustomer(service);
    const mark = stub.requests.length;
    const response = await generate(customer.apiKey, ":generateContent", {
      contents: [{
        role: "user",
        parts: [{ text: "Describe" }, { inlineData: { mimeType: `text/plain;x=${"p".repeat(100_000)}`, data: Buffer.from("hello").toString("base64") } }],
      }],
    });
    assertVendorError(response, 400, "INVALID_ARGUMENT", "UNSUPPORTED_FIELD");
    assert.match(response.json.error.message, /^contents\[0\]\.parts\[1\]\.inlineData\.mimeType /);
    assert.ok(response.text.length < 1_000, "the answer does not echo the media type");
    assert.equal(sentUpstream(mark), 0);
    await assertBalance(service, customer.apiKey, FRESH_BALANCE);
  });
});
