// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findModel } from "../../src/domain/catalog/models.js";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { jsonBytesWithin, MAX_MEDIA_TYPE_LENGTH, upstreamTextBody } from "../../src/domain/text/upstream-body.js";
import { DEFAULT_LIMITS, type ValidationLimits } from "../../src/domain/validation/limits.js";

/*
 * The synchronous text API forwards nothing unbounded (review finding 14):
 * the text of the parts and the forwarded generationConfig (as JSON) count
 * together against the text prompt limit; roles and media types are bounded.
 */

const TEXT = findModel("aimodel-3.5-flash")!;
const LIMITS = (text: number): ValidationLimits => ({ ...DEFAULT_LIMITS, maxPromptBytes: { ...DEFAULT_LIMITS.maxPromptBytes, text } });
const user = (text: string) => [{ role: "user", parts: [{ text }] }];

function refusal(work: () => unknown): { category: string; reason: string; field: unknown; message: string } | "accepted" {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return { category: error.category, reason: error.reason, field: error.facts.field, message: error.message };
  }
  return "accepted";
}

describe("JSON bytes counted without recursion", () => {
  it("when values of every JSON kind are measured within budget, then the count is the bytes of JSON.stringify", () => {
    const values: unknown[] = [
      null, true, false, 0, -1.5, 1e21, Number.NaN, "", "plain", "é ☃ 😀", "quote \" backslash \\ newline \n tab \t \u0001",
      [], [1, "a", null, [2, [3]]], {}, { a: 1, "k é": ["x", { y: false }] }, { skipped: undefined, kept: 1 }, [undefined, 2],
      { type: "OBJECT", properties: { name: { type: "STRING", description: "the name" } }, required: ["name"] },
    ];
    for (const value of values) {
      assert.equal(jsonBytesWithin(value, 1e9), Buffer.byteLength(JSON.stringify(value)), JSON.stringify(value));
    }
  });

  it("when the count passes the budget, then it stops there and answers more than the budget, however large or deep the value", () => {
    assert.ok(jsonBytesWithin("x".repeat(10_000_000), 100) > 100);
    assert.ok(jsonBytesWithin({ ["k".repeat(5_000)]: 1 }, 100) > 100);
    assert.ok(jsonBytesWithin(Array.from({ length: 100_000 }, () => "abc"), 100) > 100);
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep]; // far deeper than any recursion could go
    assert.ok(jsonBytesWithin(deep, 1_000) > 1_000);
    assert.equal(jsonBytesWithin({ a: "bc" }, 10), 10, "exactly at the budget is within it");
  });
});

describe("the forwarded generationConfig counts against the text prompt limit", () => {
  it("when text and generationConfig together are at the limit, then the request passes; a byte more, then 422 prompt_too_long naming generationConfig", () => {
    const config = { stopSequences: ["END"] }; // {"stopSequences":["END"]}: 25 bytes
    const limits = LIMITS(60);
    assert.equal(refusal(() => upstreamTextBody({ contents: user("a".repeat(35)), generationConfig: config }, TEXT, 10, limits)), "accepted");
    assert.deepEqual(refusal(() => upstreamTextBody({ contents: user("a".repeat(36)), generationConfig: config }, TEXT, 10, limits)), {
      category: "invalid",
      reason: "prompt_too_long",
      field: "generationConfig",
      message: "the text of contents and systemInstruction with generationConfig is longer than 60 bytes of UTF-8, the limit for text models",
    });
  });

  it("when the system instruction's text and a response schema share the limit, then both count; without generationConfig, the text alone is left to validation", () => {
    const limits = LIMITS(60);
    const schema = { responseSchema: { type: "STRING" } }; // {"responseSchema":{"type":"STRING"}}: 36 bytes
    const request = (system: string) => ({ contents: user("hi"), systemInstruction: { parts: [{ text: system }] }, generationConfig: schema });
    assert.equal(refusal(() => upstreamTextBody(request("s".repeat(22)), TEXT, 10, limits)), "accepted");
    assert.equal((refusal(() => upstreamTextBody(request("s".repeat(23)), TEXT, 10, limits)) as { reason: string }).reason, "prompt_too_long");
    assert.equal(refusal(() => upstreamTextBody({ contents: user("a".repeat(60)) }, TEXT, 10, limits)), "accepted");
  });

  it("when a content's role is not user, model or function, then 400 unsupported_field naming it; those three and none pass", () => {
    for (const role of ["user", "model", "function", undefined]) {
      assert.equal(refusal(() => upstreamTextBody({ contents: [{ role, parts: [{ text: "x" }] }] }, TEXT, 10)), "accepted", String(role));
    }
    for (const role of ["system", "r".repeat(1_000_000), 5]) {
      const refused = refusal(() => upstreamTextBody({ contents: [...user("x"), { role, parts: [{ text: "y" }] }] }, TEXT, 10));
      assert.deepEqual(refused, {
        category: "bad_request", reason: "unsupported_field", field: "contents[1].role",
        message: `contents[1].role is not supported by this API: a content's role is "user", "model" or "function"`,
      });
    }
  });

  it("when a media type is longer than 255 characters, then 400 unsupported_field naming the part; at 255 it passes", () => {
    const part = (mimeType: string) => ({ contents: [{ role: "user", parts: [{ text: "x" }, { inlineData: { mimeType, data: "AAAA" } }] }] });
    const at = `text/plain;x=${"p".repeat(MAX_MEDIA_TYPE_LENGTH - "text/plain;x=".length)}`;
    assert.equal(refusal(() => upstreamTextBody(part(at), TEXT, 10)), "accepted");
    assert.equal((refusal(() => upstreamTextBody(part(`${at}p`), TEXT, 10)) as { field: string }).field, "contents[0].parts[1].inlineData.mimeType");
  });

  it("when a system instruction carries a role, then only its parts are forwarded", () => {
    const { body } = upstreamTextBody({ contents: user("x"), systemInstruction: { role: "anything at all", parts: [{ text: "be brief" }] } }, TEXT, 10);
    assert.deepEqual(body.systemInstruction, { parts: [{ text: "be brief" }] });
  });
});
