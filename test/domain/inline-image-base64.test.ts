// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { InlineImageDecoder } from "../../src/domain/validation/inline-image-stream.js";
import { parseInlineImage } from "../../src/domain/validation/inline-images.js";

/*
 * Whole-text parsing (`parseInlineImage`) and the streaming decoder follow
 * one base64 grammar (RFC 4648): padding only completes the last quantum
 * ("xx==" or "xxx="), a lone character is no quantum, and the size one
 * reports is the size the other decodes.
 */

/** The decoder's answer for `text` fed in pieces of `size` characters: the decoded size, or "refused". */
function streamed(text: string, size: number): number | "refused" {
  const decoder = new InlineImageDecoder(0);
  let bytes = 0;
  try {
    for (let at = 0; at < text.length; at += size) bytes += decoder.feed(text.slice(at, at + size)).length;
    bytes += decoder.finish().length;
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.reason, "invalid_input_image");
    return "refused";
  }
  assert.equal(decoder.decodedBytes, bytes, `${JSON.stringify(text)}: decodedBytes differs from the bytes that came out`);
  return bytes;
}

/** parseInlineImage's answer: the decoded size it reports, or "refused". */
function whole(text: string): number | "refused" {
  try {
    return parseInlineImage(text, 0).decodedBytes;
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.reason, "invalid_input_image");
    return "refused";
  }
}

const PIECES = [1, 2, 3, 5, 1000];

describe("inline image base64 grammar, whole and streamed", () => {
  it("when the text is padding only, then both refuse it (never a negative size)", () => {
    for (const text of ["=", "==", "===", " = ", "data:image/png;base64,==", "data:image/png;base64,="]) {
      assert.equal(whole(text), "refused", JSON.stringify(text));
      for (const size of PIECES) assert.equal(streamed(text, size), "refused", `${JSON.stringify(text)} in pieces of ${size}`);
    }
  });

  it("when padding follows a whole quantum or does not complete the last one, then both refuse it", () => {
    for (const text of ["AAAA=", "AAAA==", "AA=", "A=", "A==", "AAA==", "AAAAAA=", "AAAAAAA==", "A===", "AAAAA===", "AA= =A"]) {
      assert.equal(whole(text), "refused", JSON.stringify(text));
      for (const size of PIECES) assert.equal(streamed(text, size), "refused", `${JSON.stringify(text)} in pieces of ${size}`);
    }
  });

  it("when the last quantum is a single character, then both refuse it (it encodes no byte)", () => {
    for (const text of ["A", "AAAAA", "AAAA AAAA A"]) {
      assert.equal(whole(text), "refused", JSON.stringify(text));
      for (const size of PIECES) assert.equal(streamed(text, size), "refused", `${JSON.stringify(text)} in pieces of ${size}`);
    }
  });

  it("when base64 is well formed, padded or not, then both report the size the decoder produces", () => {
    const cases: [string, number][] = [
      ["AAAA", 3], ["AA==", 1], ["AAA=", 2], ["AA", 1], ["AAA", 2], ["AAAAAA==", 4], ["AAAAAAA=", 5], ["AAAAAAAA", 6],
      ["AAAAAA", 4], ["AAAAAAA", 5], [" AA\nA =\t", 2], ["ab-_", 3], ["data:image/png;base64,AAAAAA==", 4],
    ];
    for (const [text, size] of cases) {
      assert.equal(whole(text), size, JSON.stringify(text));
      for (const pieces of PIECES) assert.equal(streamed(text, pieces), size, `${JSON.stringify(text)} in pieces of ${pieces}`);
    }
  });

  it("when real bytes of every length up to 64 are encoded, then both sizes are the length and the bytes round-trip", () => {
    for (let length = 1; length <= 64; length++) {
      const image = Buffer.from(Array.from({ length }, (_, i) => (i * 89 + 7) % 256));
      for (const text of [image.toString("base64"), image.toString("base64url")]) {
        assert.equal(whole(text), length, text);
        for (const size of PIECES) assert.equal(streamed(text, size), length, `${text} in pieces of ${size}`);
      }
    }
  });
});
