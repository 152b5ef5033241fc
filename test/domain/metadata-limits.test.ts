// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DomainError } from "../../src/domain/errors/domain-error.js";
import { validateGenerationRequest } from "../../src/domain/validation/generation-request.js";
import { DEFAULT_LIMITS } from "../../src/domain/validation/limits.js";
import { checkMetadata, checkMetadataShape, MAX_METADATA_DEPTH, type MetadataLimits } from "../../src/domain/validation/metadata.js";

const LIMITS: MetadataLimits = { maxKeys: 3, maxKeyBytes: 4, maxValueBytes: 12, maxTotalBytes: 40 };
const LOOSE: MetadataLimits = { maxKeys: 1000, maxKeyBytes: 1000, maxValueBytes: 1_000_000, maxTotalBytes: 1_000_000 };

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8");

function refusal(metadata: unknown, limits: MetadataLimits = LIMITS): DomainError | undefined {
  try {
    checkMetadata(metadata, limits);
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.category, "invalid");
    return error;
  }
  return undefined;
}

function assertRefused(metadata: unknown, limits: MetadataLimits, facts: Record<string, string | number>, message?: RegExp) {
  const error = refusal(metadata, limits);
  assert.ok(error, `expected ${JSON.stringify(facts)} to be refused`);
  assert.equal(error.reason, "metadata_too_large");
  assert.deepEqual(error.facts, facts);
  if (message) assert.match(error.message, message);
}

/** `levels` arrays (or objects) around a 1: {a: nest(31)} is 32 levels deep, the metadata object counted. */
function nest(levels: number, kind: "array" | "object"): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = kind === "array" ? [value] : { k: value };
  return value;
}

/** A deterministic generator of awkward JSON: escapes, multi-byte and astral characters, exponents, nesting. */
function* samples(count: number): Generator<unknown> {
  let seed = 42;
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const strings = ["", "a", "é", "😀", '"', "\\", "\n", "\u0001", "\u2028", "ab\"c\\d", "日本語", "\u0000"];
  const numbers = [0, -0, 1, -1, 0.5, -12.25, 1e21, 1.5e-7, 123456789, Number.MAX_SAFE_INTEGER];
  const make = (depth: number): unknown => {
    const pick = next(depth > 3 ? 5 : 8);
    if (pick === 0) return strings[next(strings.length)]! + strings[next(strings.length)]!;
    if (pick === 1) return numbers[next(numbers.length)];
    if (pick === 2) return [true, false, null][next(3)];
    if (pick === 3) return strings[next(strings.length)];
    if (pick === 4) return numbers[next(numbers.length)];
    if (pick === 5) return Array.from({ length: next(4) }, () => make(depth + 1));
    // Objects: some with keys whose value is undefined (JSON leaves them out), some with inherited keys (JSON ignores them).
    const object: Record<string, unknown> = next(4) === 0 ? Object.create({ inherited: "zzzz" }) : {};
    for (let i = next(4); i > 0; i--) object[strings[next(strings.length)]! + i] = next(5) === 0 ? undefined : make(depth + 1);
    return object;
  };
  for (let i = 0; i < count; i++) yield make(0);
}

describe("metadata limits", () => {
  it("when nothing is configured, then metadata has at most 64 keys of 256 bytes, values of 4 KiB, 16 KiB in all, 32 levels", () => {
    assert.deepEqual(DEFAULT_LIMITS.metadata, { maxKeys: 64, maxKeyBytes: 256, maxValueBytes: 4096, maxTotalBytes: 16384 });
    assert.equal(MAX_METADATA_DEPTH, 32);
  });

  it("when metadata is absent or null, then there is nothing to check", () => {
    assert.equal(refusal(undefined), undefined);
    assert.equal(refusal(null), undefined);
    assert.equal(refusal({}), undefined);
  });

  it("when metadata is not a JSON object, then it is refused as invalid_metadata", () => {
    for (const bad of [[], ["a"], "a", 1, true]) {
      const error = refusal(bad);
      assert.equal(error?.reason, "invalid_metadata", JSON.stringify(bad));
      assert.deepEqual(error?.facts, { field: "metadata" });
      assert.match(error!.message, /^metadata must be a JSON object/);
    }
    for (const bad of [{ a: () => 1 }, { a: [1, 2n] }, { a: { b: Symbol("s") } }]) assert.equal(refusal(bad, LOOSE)?.reason, "invalid_metadata");
    // Undefined is no value: JSON writes it as null in an array and leaves it out of an object.
    assert.equal(refusal({ a: [undefined, 1], b: { c: undefined } }, LOOSE), undefined);
  });

  it("when metadata has exactly the most keys, then it is accepted; one more, then refused", () => {
    assert.equal(refusal({ a: 1, b: 2, c: 3 }), undefined);
    assertRefused({ a: 1, b: 2, c: 3, d: 4 }, LIMITS, { field: "metadata", rule: "keys", limit: 3 }, /^metadata has more than 3 keys$/);
    assert.equal(refusal({}, { ...LIMITS, maxKeys: 0 }), undefined);
    assertRefused({ a: 1 }, { ...LIMITS, maxKeys: 0 }, { field: "metadata", rule: "keys", limit: 0 });
    // Inherited keys are not the object's: JSON leaves them out, and so does the count.
    assert.equal(refusal(Object.assign(Object.create({ x: 1, y: 2, z: 3, w: 4 }), { a: 1 }), { ...LIMITS, maxKeys: 1 }), undefined);
  });

  it("when metadata has a million keys, then it is refused for its key count before anything else is read", () => {
    const huge: Record<string, number> = {};
    for (let i = 0; i < 1_000_000; i++) huge[`k${i}`] = i;
    const started = performance.now();
    assertRefused(huge, DEFAULT_LIMITS.metadata, { field: "metadata", rule: "keys", limit: 64 });
    assert.ok(performance.now() - started < 2_000, `took ${performance.now() - started} ms`);
  });

  it("when a key has exactly the most UTF-8 bytes, then it is accepted; one byte more, then refused and shown", () => {
    assert.equal(refusal({ abcd: 1, "éé": 2 }), undefined);
    assertRefused({ abcde: 1 }, LIMITS, { field: "metadata", rule: "key_bytes", limit: 4 }, /^metadata key "abcde" is longer than 4 bytes of UTF-8$/);
    // Three characters, five bytes.
    assertRefused({ "ééa": 1 }, LIMITS, { field: "metadata", rule: "key_bytes", limit: 4 });
    // A long key is shown cut after 32 characters.
    const long = "k".repeat(1000);
    const error = refusal({ [long]: 1 });
    assert.ok(error?.message.includes(`"${"k".repeat(32)}…"`), error?.message);
    assert.ok(!error?.message.includes("k".repeat(33)));
  });

  it("when a value has exactly the most bytes as JSON, then it is accepted; one byte more, then refused with its key", () => {
    // "xxxxxxxxxx" with its quotes is 12 bytes; escapes and multi-byte characters count as JSON writes them.
    for (const fits of ["x".repeat(10), '"'.repeat(5), "é".repeat(5), [1, 2, 3, 4, 56], { ab: [1, 2] }, 123456789012]) {
      assert.equal(jsonBytes(fits), 12);
      assert.equal(refusal({ a: fits }), undefined, JSON.stringify(fits));
    }
    for (const over of ["x".repeat(11), `${'"'.repeat(5)}x`, `${"é".repeat(5)}x`, [1, 2, 3, 4, 567], { abc: [1, 2] }, 1234567890123]) {
      assert.equal(jsonBytes(over), 13);
      assertRefused({ a: over }, LIMITS, { field: "metadata.a", rule: "value_bytes", limit: 12 }, /^metadata\.a is more than 12 bytes as JSON$/);
    }
  });

  it("when metadata has exactly the most bytes as JSON in all, then it is accepted; one byte more, then refused", () => {
    const fits = { a: "x".repeat(10), "é": [1, 2, 3], skipped: undefined, b: true };
    assert.equal(jsonBytes(fits), 40);
    assert.equal(refusal(fits), undefined);
    const over = { a: "x".repeat(10), "é": [1, 2, 30], b: true };
    assert.equal(jsonBytes(over), 41);
    assertRefused(over, LIMITS, { field: "metadata", rule: "total_bytes", limit: 40 }, /^metadata is more than 40 bytes as JSON$/);
  });

  it("when any JSON is measured, then its size is exactly what JSON.stringify gives it", () => {
    let checked = 0;
    for (const value of samples(400)) {
      const bytes = jsonBytes(value);
      if (bytes === undefined || bytes < 2) continue;
      const metadata = { v: value };
      assert.equal(refusal(metadata, { ...LOOSE, maxValueBytes: bytes }), undefined, JSON.stringify(value));
      assert.equal(refusal(metadata, { ...LOOSE, maxValueBytes: bytes - 1 })?.facts.rule, "value_bytes", JSON.stringify(value));
      const total = jsonBytes(metadata);
      assert.equal(refusal(metadata, { ...LOOSE, maxTotalBytes: total }), undefined, JSON.stringify(value));
      assert.equal(refusal(metadata, { ...LOOSE, maxTotalBytes: total - 1 })?.facts.rule, "total_bytes", JSON.stringify(value));
      checked++;
    }
    assert.ok(checked > 300, `${checked} samples`);
  });

  it("when a value's first part already passes the limit, then it is refused without reading the rest", () => {
    // [sentinel, prefix]: the walk takes the prefix first; the sentinel's key is only read if the walk goes on.
    // Each prefix's count is a lower bound of its JSON size: brackets and comma 3, then the prefix's own.
    const prefixes: [unknown, number][] = [
      ["abcd", 6], ["é", 3], [12345, 1], [true, 4], [false, 4], [null, 4],
      [[], 2], [[1, 2, 3], 7], [{}, 2], [{ ab: 1, c: 2 }, 14], [{ ab: 1, skip: undefined }, 8],
    ];
    for (const [prefix, floor] of prefixes) {
      const readsSentinel = (maxValueBytes: number) => {
        let read = false;
        const sentinel = {
          get x() {
            read = true;
            return 1;
          },
        };
        const error = refusal({ v: [sentinel, prefix] }, { ...LOOSE, maxValueBytes });
        return { read, rule: error?.facts.rule };
      };
      assert.deepEqual(readsSentinel(3 + floor - 1), { read: false, rule: "value_bytes" }, JSON.stringify(prefix));
      assert.equal(readsSentinel(3 + floor).read, true, JSON.stringify(prefix));
    }
  });

  it("when a value is a huge array or object, then it is refused for its size", () => {
    assertRefused({ a: new Array(1_000_000).fill(0) }, DEFAULT_LIMITS.metadata, { field: "metadata.a", rule: "value_bytes", limit: 4096 });
    const wide: Record<string, number> = {};
    for (let i = 0; i < 100_000; i++) wide[`k${i}`] = i;
    assertRefused({ a: wide }, DEFAULT_LIMITS.metadata, { field: "metadata.a", rule: "value_bytes", limit: 4096 });
  });

  for (const kind of ["array", "object"] as const) {
    it(`when ${kind}s nest exactly ${MAX_METADATA_DEPTH} levels deep, then it is accepted; one level more, then refused`, () => {
      assert.equal(refusal({ a: nest(MAX_METADATA_DEPTH - 1, kind) }, LOOSE), undefined);
      assertRefused({ a: nest(MAX_METADATA_DEPTH, kind) }, LOOSE, { field: "metadata.a", rule: "depth", limit: 32 },
        /^metadata nests objects and arrays more than 32 levels deep$/);
    });

    it(`when ${kind}s nest 100 000 levels deep, then it is refused without overflowing the stack`, () => {
      assertRefused({ a: nest(100_000, kind) }, DEFAULT_LIMITS.metadata, { field: "metadata.a", rule: "depth", limit: 32 });
    });
  }

  it("when no limits are at hand, then only the shape is checked: a JSON object, at most 32 levels deep, of any size", () => {
    const shape = (metadata: unknown) => {
      try {
        checkMetadataShape(metadata);
        return "accepted";
      } catch (error) {
        assert.ok(error instanceof DomainError);
        return `${error.reason}:${error.facts.rule ?? ""}:${error.facts.field}`;
      }
    };
    assert.equal(shape(undefined), "accepted");
    assert.equal(shape(null), "accepted");
    assert.equal(shape({ a: "x".repeat(100_000), b: new Array(10_000).fill({ c: 1 }), skip: undefined }), "accepted");
    assert.equal(shape({ a: nest(MAX_METADATA_DEPTH - 1, "object") }), "accepted");
    assert.equal(shape({ a: 1, b: nest(MAX_METADATA_DEPTH, "array") }), "metadata_too_large:depth:metadata.b");
    assert.equal(shape({ a: nest(100_000, "object") }), "metadata_too_large:depth:metadata.a");
    assert.equal(shape({ ["k".repeat(257)]: nest(40, "array") }), "metadata_too_large:depth:metadata");
    assert.equal(shape({ ["k".repeat(256)]: nest(40, "array") }), `metadata_too_large:depth:metadata.${"k".repeat(256)}`);
    assert.equal(shape(Object.assign(Object.create({ deep: nest(40, "array") }), { a: 1 })), "accepted");
    assert.equal(shape([]), "invalid_metadata::metadata");
    assert.equal(shape("a"), "invalid_metadata::metadata");
    assert.equal(shape({ a: [() => 1] }), "invalid_metadata::metadata");
  });

  it("when several limits are broken, then the cheapest is reported: keys, key bytes, depth, value bytes, total bytes", () => {
    assert.equal(refusal({ abcdef: 1, b: 1, c: 1, d: 1 })?.facts.rule, "keys");
    assert.equal(refusal({ abcdef: nest(40, "array") })?.facts.rule, "key_bytes");
    assert.equal(refusal({ a: nest(40, "array") }, { ...LIMITS, maxValueBytes: 1000 })?.facts.rule, "depth");
    assert.equal(refusal({ a: "x".repeat(50) }, { ...LIMITS, maxTotalBytes: 20 })?.facts.rule, "value_bytes");
    assert.equal(refusal({ a: "x".repeat(10), b: "x".repeat(10) }, { ...LIMITS, maxTotalBytes: 20 })?.facts.rule, "total_bytes");
  });

  it("when a job request carries metadata over a limit, then validation refuses it", () => {
    const request = (metadata: Record<string, unknown>) => ({ model: "aimodel-3.5-flash", prompt: "p", inputImagesUrls: [], inputImagesBase64: [], metadata });
    const limits = { ...DEFAULT_LIMITS, metadata: LIMITS };
    assert.deepEqual(validateGenerationRequest(request({ a: 1 }), limits).metadata, { a: 1 });
    assert.throws(() => validateGenerationRequest(request({ a: 1, b: 2, c: 3, d: 4 }), limits), { reason: "metadata_too_large" });
  });
});
