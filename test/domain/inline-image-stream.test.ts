// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { InlineImageDecoder } from "../../src/domain/validation/inline-image-stream.js";
import { parseInlineImage } from "../../src/domain/validation/inline-images.js";

/** Feeds `text` in pieces of the given sizes (cycled), returning all decoded bytes. */
function decodeInPieces(text: string, sizes: readonly number[], index = 0): { bytes: Buffer; decoder: InlineImageDecoder } {
  const decoder = new InlineImageDecoder(index);
  const out: Uint8Array[] = [];
  for (let at = 0, turn = 0; at < text.length; turn++) {
    const size = sizes[turn % sizes.length]!;
    out.push(decoder.feed(text.slice(at, at + size)));
    at += size;
  }
  out.push(decoder.finish());
  return { bytes: Buffer.concat(out), decoder };
}

const reasonOf = (work: () => unknown) => {
  try {
    work();
    return "accepted";
  } catch (error) {
    assert.ok(error instanceof DomainError);
    return `${error.reason}:${error.facts.field}`;
  }
};

const sample = (length: number) => Buffer.from(Array.from({ length }, (_, i) => (i * 37 + 11) % 256));

describe("inline images decoded as they arrive", () => {
  it("when base64 arrives in pieces of any size, then the bytes are exactly the image's, as parsing it whole would count them", () => {
    for (const length of [1, 2, 3, 4, 5, 47, 48, 1000]) {
      const image = sample(length);
      const text = image.toString("base64");
      for (const sizes of [[1], [2], [3], [5, 1, 7], [4096]]) {
        const { bytes, decoder } = decodeInPieces(text, sizes);
        assert.deepEqual(bytes, image, `length ${length}, pieces ${sizes}`);
        assert.equal(decoder.decodedBytes, parseInlineImage(text, 0).decodedBytes);
      }
    }
  });

  it("when the image is a data URI, then its media type is read from the prefix, even split across pieces", () => {
    const image = sample(100);
    const text = `data:image/jpeg;base64,${image.toString("base64")}`;
    for (const sizes of [[1], [6], [30]]) {
      const { bytes, decoder } = decodeInPieces(text, sizes);
      assert.deepEqual(bytes, image);
      assert.equal(decoder.mimeType, "image/jpeg");
    }
    assert.equal(decodeInPieces(sample(3).toString("base64"), [2]).decoder.mimeType, "application/octet-stream");
  });

  it("when base64 carries whitespace or URL-safe characters, then they decode as whole-text parsing allows", () => {
    const image = sample(60);
    const wrapped = image.toString("base64").replace(/(.{10})/g, "$1\r\n");
    assert.deepEqual(decodeInPieces(wrapped, [3]).bytes, image);
    const urlSafe = image.toString("base64url");
    assert.deepEqual(decodeInPieces(urlSafe, [7]).bytes, image);
  });

  it("when padding is split from its group, then it still decodes", () => {
    const image = sample(4); // "....==" after the first group
    const text = image.toString("base64");
    assert.ok(text.endsWith("=="));
    assert.deepEqual(decodeInPieces(text, [text.length - 1, 1]).bytes, image);
  });

  it("when the text is not base64, then it is refused naming the image's field, like whole-text parsing", () => {
    for (const bad of ["", "   ", "ab$c", "abcd=x", "ab===", "data:image/png;base64,", "QUJD=QUJD", "data:image/png;base64,@@"]) {
      assert.equal(reasonOf(() => decodeInPieces(bad, [2], 3)), "invalid_input_image:input_images_base64[3]", JSON.stringify(bad));
      assert.equal(reasonOf(() => parseInlineImage(bad, 3)), "invalid_input_image:input_images_base64[3]", JSON.stringify(bad));
    }
  });

  it("when a long text has no data-URI comma, then it is plain base64 and is decoded without waiting for the end", () => {
    const decoder = new InlineImageDecoder(0);
    const text = sample(300).toString("base64");
    const early = decoder.feed(text.slice(0, 260));
    assert.ok(early.length > 0, "decoding waits for the whole text");
    const rest = Buffer.concat([early, decoder.feed(text.slice(260)), decoder.finish()]);
    assert.deepEqual(rest, sample(300));
  });
});
