// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, ScalarType, toJson, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { GenerateContentResponseSchema } from "../../gen/generation/v1/text_service_pb.js";
import { generateContentResponseJson } from "../../src/transport/http/vendor-json.js";

/** A small seeded generator, so a failure names a message that can be made again. */
function prng(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const STRINGS = ["", "model", "STOP", "TEXT", "a \"quoted\" \\ line\nnext", "ünïcødé ✓ 🚀", "\u0000\u001f control", "</script>"];

/**
 * A message of `schema` with its fields set at random from the schema's own
 * description (zero values, unset optional fields, empty lists and every
 * oneof case included), so any field the protos gain is exercised here.
 */
function randomMessage(schema: DescMessage, random: () => number, depth = 0): Record<string, unknown> {
  const pick = <T>(values: readonly T[]) => values[Math.floor(random() * values.length)]!;
  const scalar = (field: DescField & { scalar?: ScalarType }): unknown => {
    switch (field.scalar) {
      case ScalarType.STRING: return pick(STRINGS);
      case ScalarType.INT32: return pick([0, 1, 7, 123456, -5, 2147483647]);
      case ScalarType.BOOL: return random() < 0.5;
      case ScalarType.BYTES: return Uint8Array.from({ length: pick([0, 1, 2, 3, 10]) }, () => Math.floor(random() * 256));
      default: throw new Error(`randomMessage: scalar type ${field.scalar} of ${field.name} is not generated; extend this test`);
    }
  };
  const value = (field: DescField): unknown => {
    // A Struct field is a JSON object in protobuf-es (a function call's args, a function response).
    if (field.fieldKind === "message" && field.message.typeName === "google.protobuf.Struct") {
      return pick([{}, { city: pick(STRINGS), days: pick([0, 3, -1.5]), nested: { ok: random() < 0.5, list: [1, "two", null] } }]);
    }
    if (field.fieldKind === "message") return depth > 4 ? undefined : create(field.message, randomMessage(field.message, random, depth + 1) as never);
    if (field.fieldKind === "scalar") return scalar(field);
    throw new Error(`randomMessage: ${field.fieldKind} field ${field.name} is not generated; extend this test`);
  };
  const init: Record<string, unknown> = {};
  for (const field of schema.fields) {
    if (field.oneof) continue;
    if (field.fieldKind === "list") {
      const element = field.listKind === "message" ? () => create(field.message, randomMessage(field.message, random, depth + 1) as never) : () => scalar(field as never);
      init[field.localName] = Array.from({ length: pick([0, 1, 1, 2, 3]) }, element);
    } else if (field.fieldKind === "map") {
      throw new Error(`randomMessage: map field ${field.name} is not generated; extend this test`);
    } else if (random() < 0.8) {
      init[field.localName] = value(field);
    }
  }
  for (const oneof of schema.oneofs) {
    const field = pick([undefined, ...oneof.fields]);
    if (field) init[oneof.localName] = { case: field.localName, value: value(field) };
  }
  return init;
}

describe("generateContentResponseJson", () => {
  it("when given any response (2000 made at random from the schema), then it writes exactly what toJson and JSON.stringify write", () => {
    const random = prng(20261124);
    for (let i = 0; i < 2000; i++) {
      const message = create(GenerateContentResponseSchema, randomMessage(GenerateContentResponseSchema, random) as never);
      const expected = JSON.stringify(toJson(GenerateContentResponseSchema, message));
      assert.equal(generateContentResponseJson(message), expected, `message ${i}`);
    }
  });

  it("when a count with explicit presence is 0, then it is written, and an unset one is not", () => {
    const message = create(GenerateContentResponseSchema, {
      usageMetadata: { promptTokenCount: 0, totalTokenCount: 3 },
      candidates: [{ index: 0, content: { parts: [{ data: { case: "text", value: "" } }] } }],
    });
    assert.equal(generateContentResponseJson(message), '{"candidates":[{"content":{"parts":[{"text":""}]}}],"usageMetadata":{"promptTokenCount":0,"totalTokenCount":3}}');
  });

  it("when an image part is in a slice of a larger buffer, then only its own bytes are encoded", () => {
    const whole = Uint8Array.from([9, 9, 1, 2, 3, 9]);
    const message = create(GenerateContentResponseSchema, {
      candidates: [{ content: { parts: [{ data: { case: "inlineData", value: { mimeType: "image/png", data: whole.subarray(2, 5) } } }] } }],
    });
    assert.equal(generateContentResponseJson(message), '{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AQID"}}]}}]}');
  });
});
