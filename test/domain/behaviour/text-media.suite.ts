import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findModel } from "../../../src/domain/catalog/models.js";
import { DomainError } from "../../../src/domain/errors/domain-error.js";
import {
  base64Head, IMAGE_HEAD_BYTES, imagePromptTokens, imageSizeOf, mediaKindOf, mediaPromptTokens,
} from "../../../src/domain/text/media-tokens.js";
import { IMAGE_PROMPT_TOKEN_ALLOWANCE, promptTokenEstimate } from "../../../src/domain/text/tokens.js";
import { upstreamTextBody } from "../../../src/domain/text/upstream-body.js";
import { bmp, frame, gif, jpeg, png, segment, webpExtended, webpLossless, webpLossy } from "./image-headers.js";

const TEXT = findModel("aimodel-3.5-flash")!;
const OMNI = findModel("aimodel-omni-1.1-flash")!;
const cut = (bytes: Uint8Array, length: number) => bytes.subarray(0, length);

describe("image dimensions from headers", () => {
  it("when a PNG header is whole, then its size is read, up to 32 bits a side; one byte short, it is not", () => {
    assert.deepEqual(imageSizeOf(png(70_000, 3)), { width: 70_000, height: 3 });
    assert.deepEqual(imageSizeOf(png(300, 257)), { width: 300, height: 257 });
    assert.equal(imageSizeOf(cut(png(300, 257), 23)), undefined);
  });

  it("when a PNG header's signature or first chunk is wrong, then it is not read", () => {
    const wrongFirstByte = png(300, 200);
    wrongFirstByte[0] = 0x88;
    assert.equal(imageSizeOf(wrongFirstByte), undefined);
    const wrongChunk = png(300, 200);
    wrongChunk[12] = "J".charCodeAt(0);
    assert.equal(imageSizeOf(wrongChunk), undefined);
    const wrongName = png(300, 200);
    wrongName[2] = "X".charCodeAt(0);
    assert.equal(imageSizeOf(wrongName), undefined);
  });

  it("when a side is zero, then there is no size", () => {
    assert.equal(imageSizeOf(png(0, 10)), undefined);
    assert.equal(imageSizeOf(png(10, 0)), undefined);
    assert.equal(imageSizeOf(gif(0, 0)), undefined);
  });

  it("when a GIF header of either version is whole, then its size is read; one byte short or another version, it is not", () => {
    assert.deepEqual(imageSizeOf(gif(300, 257)), { width: 300, height: 257 });
    assert.deepEqual(imageSizeOf(gif(65_535, 2, "GIF87a")), { width: 65_535, height: 2 });
    assert.equal(imageSizeOf(cut(gif(300, 257), 9)), undefined);
    assert.equal(imageSizeOf(gif(300, 257, "GIF88a")), undefined);
  });

  it("when a BMP header is whole, then its size is read, top-down rows included; one byte short, it is not", () => {
    assert.deepEqual(imageSizeOf(bmp(640, 480)), { width: 640, height: 480 });
    assert.deepEqual(imageSizeOf(bmp(640, -480)), { width: 640, height: 480 });
    assert.equal(imageSizeOf(cut(bmp(640, 5), 25)), undefined);
  });

  it("when a WebP header is lossy, lossless or extended, then its size is read from its own layout", () => {
    assert.deepEqual(imageSizeOf(webpLossy(1000, 16_383, 3)), { width: 1000, height: 16_383 });
    assert.deepEqual(imageSizeOf(webpLossy(257, 257)), { width: 257, height: 257 });
    assert.deepEqual(imageSizeOf(webpLossless(16_384, 1)), { width: 16_384, height: 1 });
    assert.deepEqual(imageSizeOf(webpLossless(1, 16_384)), { width: 1, height: 16_384 });
    assert.deepEqual(imageSizeOf(webpLossless(300, 200)), { width: 300, height: 200 });
    assert.deepEqual(imageSizeOf(webpExtended(1 << 24, 70_000)), { width: 1 << 24, height: 70_000 });
  });

  it("when a WebP header is one byte short, not RIFF/WEBP, or of an unknown chunk, then it is not read", () => {
    assert.equal(imageSizeOf(cut(webpLossy(257, 257), 29)), undefined);
    const unknownChunk = webpLossy(257, 257);
    unknownChunk[15] = "Y".charCodeAt(0);
    assert.equal(imageSizeOf(unknownChunk), undefined);
    for (const at of [3, 11]) {
      const wrong = webpLossy(257, 257);
      wrong[at] = "X".charCodeAt(0);
      assert.equal(imageSizeOf(wrong), undefined, `byte ${at}`);
    }
  });

  it("when a JPEG's frame comes first, then its size is read, for every start-of-frame marker from C0 to CF", () => {
    for (const marker of [0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc9, 0xcd, 0xcf]) {
      assert.deepEqual(imageSizeOf(jpeg(frame(marker, 640, 480))), { width: 640, height: 480 }, marker.toString(16));
    }
  });

  it("when segments come before the frame, then they are skipped by their length, tables that look like frames too", () => {
    const decoy = [8, 0, 1, 0, 1, 1, 1, 0x11, 0];
    const bytes = jpeg(segment(0xe0, [0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0]), segment(0xc4, decoy), segment(0xc8, decoy),
      segment(0xcc, decoy), segment(0xbf, decoy), segment(0xdb, decoy), frame(0xc2, 4000, 3000));
    assert.deepEqual(imageSizeOf(bytes), { width: 4000, height: 3000 });
  });

  it("when markers without a length or fill bytes come before the frame, then they are stepped over", () => {
    const bytes = jpeg([0xff, 0xff], [0xff, 0xd8], [0xff, 0x01], [0xff, 0xd0], [0xff, 0xd7], [0xff, 0xff, 0xff], frame(0xc0, 32, 16));
    assert.deepEqual(imageSizeOf(bytes), { width: 32, height: 16 });
  });

  it("when a JPEG's frame is cut short, or a marker is missing its 0xFF, then there is no size", () => {
    const whole = jpeg(frame(0xc0, 640, 480));
    // The walk reads a frame only with a byte to spare after its width.
    assert.deepEqual(imageSizeOf(cut(whole, 12)), { width: 640, height: 480 });
    assert.equal(imageSizeOf(cut(whole, 11)), undefined);
    assert.equal(imageSizeOf(jpeg([0xfe, 0xe0, 0, 4, 0, 0], frame(0xc0, 640, 480))), undefined);
    assert.equal(imageSizeOf(jpeg(segment(0xe0, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]))), undefined);
  });

  it("when the first bytes are not a JPEG's start, then it is not read as one", () => {
    const notStart = jpeg(frame(0xc0, 640, 480));
    notStart[1] = 0xd9;
    assert.equal(imageSizeOf(notStart), undefined);
    const notMarker = jpeg(frame(0xc0, 640, 480));
    notMarker[0] = 0xfe;
    assert.equal(imageSizeOf(notMarker), undefined);
    assert.equal(imageSizeOf(new Uint8Array(0)), undefined);
  });
});

describe("prompt tokens of inline media", () => {
  it("when an image's size is unknown, then it is counted as 4096 × 4096: 36 tiles, 9288 tokens", () => {
    assert.equal(imagePromptTokens(undefined), 9288);
    assert.equal(IMAGE_PROMPT_TOKEN_ALLOWANCE, 9288);
  });

  it("when an image has 9 tiles or fewer, then it counts at least the highest per-image count, 2240", () => {
    for (const [width, height] of [[1, 1], [384, 384], [385, 385], [768, 768], [2304, 1536]]) {
      assert.equal(imagePromptTokens({ width, height }), 2240, `${width}×${height}`);
    }
    assert.equal(imagePromptTokens({ width: 2304, height: 2304 }), 2322);
  });

  it("when a side passes a tile's edge by one pixel, then a row or column of tiles is added", () => {
    assert.equal(imagePromptTokens({ width: 2305, height: 2304 }), 12 * 258);
    assert.equal(imagePromptTokens({ width: 2304, height: 2305 }), 12 * 258);
    // A thin image: one tile across, ten down.
    assert.equal(imagePromptTokens({ width: 100, height: 7000 }), 10 * 258);
    assert.equal(imagePromptTokens({ width: 7000, height: 100 }), 10 * 258);
  });

  it("when a media type is read, then case, parameters and spaces do not matter", () => {
    const kinds = {
      "image/png": "image", "IMAGE/JPEG; q=1": "image", " image/webp": "image",
      "audio/wav": "audio_video", "video/mp4": "audio_video", "Audio/OGG;codecs=opus": "audio_video",
      "text/plain": "text", "text/x-c++": "text", "text/vnd.a-b_c": undefined, "text/plain ; charset=utf-8": "text", "TEXT/CSV": "text",
      "application/json": "text", "application/xml": "text", "application/x-javascript": "text", "application/x-python": "text",
      "application/x-typescript": "text",
      "application/pdf": undefined, "text/": undefined, "application/jsonx": undefined, "xapplication/json": undefined,
      "xtext/plain": undefined, "application/x-java": undefined, "": undefined, "ximage/png": undefined, "video": undefined,
    } as const;
    for (const [type, kind] of Object.entries(kinds)) assert.equal(mediaKindOf(type), kind, type);
  });

  it("when inline media is counted, then images by their header, audio and video by 8 bytes a token, text by its bytes", () => {
    assert.equal(mediaPromptTokens({ mimeType: "image/png", bytes: 24, head: png(2304, 2304) }), 2322);
    assert.equal(mediaPromptTokens({ mimeType: "image/png", bytes: 24 }), 9288);
    assert.equal(mediaPromptTokens({ mimeType: "image/png", bytes: 3, head: Uint8Array.from([1, 2, 3]) }), 9288);
    assert.equal(mediaPromptTokens({ mimeType: "audio/wav", bytes: 16 }), 2);
    assert.equal(mediaPromptTokens({ mimeType: "video/mp4", bytes: 17 }), 3);
    assert.equal(mediaPromptTokens({ mimeType: "application/json", bytes: 100 }), 100);
    assert.equal(mediaPromptTokens({ mimeType: "application/pdf", bytes: 100 }), undefined);
  });

  it("when a prompt has media parts, then the estimate adds each part's tokens; a refused type adds none", () => {
    assert.equal(promptTokenEstimate("abcd"), 1);
    assert.equal(promptTokenEstimate("abcd", [{ mimeType: "text/plain", bytes: 10 }, { mimeType: "video/mp4", bytes: 80 }]), 1 + 10 + 10);
    assert.equal(promptTokenEstimate("abcd", [{ mimeType: "application/pdf", bytes: 10 }, { mimeType: "text/plain", bytes: 10 }]), 1 + 10);
  });

  it("when an image's base64 is long, then only about its first MiB is decoded for the header", () => {
    const image = Buffer.alloc(2 * IMAGE_HEAD_BYTES, 7);
    const head = base64Head(image.toString("base64"));
    assert.equal(IMAGE_HEAD_BYTES, 1024 * 1024);
    assert.ok(head.length >= IMAGE_HEAD_BYTES && head.length < IMAGE_HEAD_BYTES + 3, String(head.length));
    assert.deepEqual(Buffer.from(base64Head(Buffer.from(png(1, 2)).toString("base64"))), Buffer.from(png(1, 2)));
  });
});

describe("the upstream text body", () => {
  const body = (request: Record<string, unknown>, model = TEXT, max = 100) => upstreamTextBody(request, model, max);
  const contents = [{ role: "user", parts: [{ text: "hi" }, { inlineData: { mimeType: "image/png", data: "AAAA" } }, { text: "" }] }];
  /** "field | message" of the 400 refusal, or "accepted". */
  const refused = (work: () => unknown) => {
    try {
      work();
    } catch (error) {
      assert.ok(error instanceof DomainError, String(error));
      assert.equal(error.category, "bad_request");
      assert.equal(error.reason, "unsupported_field");
      return `${error.facts.field} | ${error.message}`;
    }
    return "accepted";
  };

  it("when a request carries contents, a system instruction and options, then they pass with the reserved output bound", () => {
    const system = { parts: [{ text: "be brief" }] };
    assert.deepEqual(body({ contents, systemInstruction: system, generationConfig: { temperature: 0.5, maxOutputTokens: 99_999 } }), {
      body: { contents, generationConfig: { temperature: 0.5, maxOutputTokens: 100 }, systemInstruction: system },
      extraPromptTokens: 0,
      thinkingTokens: 0,
      builtInTools: [],
      toolFee: 0n,
    });
  });

  it("when the request has no system instruction, options or contents, then none are invented", () => {
    assert.deepEqual(body({ contents }), { body: { contents, generationConfig: { maxOutputTokens: 100 } }, extraPromptTokens: 0, thinkingTokens: 0, builtInTools: [], toolFee: 0n });
    assert.deepEqual(body({}).body, { contents: [], generationConfig: { maxOutputTokens: 100 } });
    assert.deepEqual(body({ contents, generationConfig: "x" }).body.generationConfig, { maxOutputTokens: 100 });
    assert.deepEqual(body({ contents, generationConfig: ["temperature"] }).body.generationConfig, { maxOutputTokens: 100 });
    assert.deepEqual(body({ contents, generationConfig: null }).body.generationConfig, { maxOutputTokens: 100 });
  });

  it("when a top-level field other than the six passed ones is sent, then it is refused naming it; cachedContent says caching is not offered", () => {
    assert.equal(refused(() => body({ contents, labels: {} })),
      "labels | labels is not supported by this API: only contents, systemInstruction, generationConfig, tools, toolConfig and safetySettings are passed to the model");
    assert.equal(refused(() => body({ cachedContent: "c" })),
      "cachedContent | cachedContent is not supported by this API: context caching is not offered; send the whole conversation in contents");
    assert.equal(refused(() => body({ contents, tools: [], toolConfig: {}, safetySettings: [] })), "accepted");
  });

  it("when a part is neither text nor inline data, then it is refused naming the part", () => {
    const withFile = [contents[0], { role: "user", parts: [{ fileData: { uri: "gs://x" } }] }];
    assert.equal(refused(() => body({ contents: withFile })),
      "contents[1].parts[0] | contents[1].parts[0] is not supported by this API: only text, inlineData, functionCall and functionResponse parts are accepted");
    assert.equal(refused(() => body({ contents, systemInstruction: { parts: [{ text: "a" }, { functionCall: {} }] } })),
      "systemInstruction.parts[1] | systemInstruction.parts[1] is not supported by this API: only text and inlineData parts are accepted");
    assert.equal(refused(() => body({ contents: [{ role: "user" }], systemInstruction: {} })), "accepted");
  });

  it("when every priced generation option is sent, then all pass; any other is refused naming it", () => {
    const config = {
      maxOutputTokens: 1, temperature: 1, topP: 1, topK: 1, candidateCount: 1, stopSequences: [], seed: 1, presencePenalty: 0,
      frequencyPenalty: 0, responseMimeType: "text/plain", responseSchema: { type: "string" }, responseJsonSchema: { type: "string" },
      responseModalities: ["TEXT"], imageConfig: {}, thinkingConfig: { includeThoughts: true, thinkingBudget: 5, thinkingLevel: "low" },
    };
    // A thinking level names no number: the model's largest budget is reserved on top of the allowance.
    assert.deepEqual(body({ contents, generationConfig: config }).body.generationConfig, { ...config, maxOutputTokens: 100 + 24_576 });
    assert.equal(refused(() => body({ contents, generationConfig: { temperature: 1, safetySettings: [] } })),
      "generationConfig.safetySettings | generationConfig.safetySettings is not supported by this API: not a priced generation option");
  });

  it("when a response schema is sent, then the upstream counts it as prompt, by our token rule", () => {
    // {"type":"string"} is 17 bytes: 5 tokens.
    assert.equal(body({ contents, generationConfig: { responseSchema: { type: "string" } } }).extraPromptTokens, 5);
  });

  it("when output modalities are asked, then only those the model's prices cover are allowed", () => {
    assert.equal(refused(() => body({ contents, generationConfig: { responseModalities: ["TEXT"] } })), "accepted");
    assert.equal(refused(() => body({ contents, generationConfig: { responseModalities: ["TEXT", "VIDEO"] } })),
      "generationConfig.responseModalities | generationConfig.responseModalities is not supported by this API: aimodel-3.5-flash is billed for TEXT output only (got VIDEO)");
    assert.equal(refused(() => body({ contents, generationConfig: { responseModalities: ["TEXT", "VIDEO"] } }, OMNI)), "accepted");
    assert.match(refused(() => body({ contents, generationConfig: { responseModalities: ["AUDIO"] } }, OMNI)),
      /aimodel-omni-1\.1-flash is billed for TEXT and VIDEO output only \(got AUDIO\)$/);
  });

  it("when the thinking budget is from -1 to the model's largest, then it passes and is reserved on top of the allowance; else refused", () => {
    const thinking = (thinkingConfig: unknown) => body({ contents, generationConfig: { thinkingConfig } });
    for (const [thinkingBudget, reserved] of [[0, 0], [1, 1], [4096, 4096], [24_576, 24_576], [-1, 24_576]] as const) {
      const built = thinking({ thinkingBudget });
      assert.equal(built.thinkingTokens, reserved, String(thinkingBudget));
      assert.equal((built.body.generationConfig as { maxOutputTokens: number }).maxOutputTokens, 100 + reserved, String(thinkingBudget));
    }
    assert.equal(body({ contents, generationConfig: { thinkingConfig: { thinkingBudget: 32_768 } } }, findModel("aimodel-3.1-pro-preview")!).thinkingTokens, 32_768);
    for (const thinkingBudget of [-2, 24_577, 1.5, "5"]) {
      assert.equal(refused(() => thinking({ thinkingBudget })),
        "generationConfig.thinkingConfig.thinkingBudget | generationConfig.thinkingConfig.thinkingBudget is not supported by this API: " +
        "thinking is billed as output and reserved on top of maxOutputTokens: a budget is from 0 to 24576 for aimodel-3.5-flash, or -1 (dynamic)",
        String(thinkingBudget));
    }
  });

  it("when a thinking level is given, then the model's largest budget is reserved; an unknown level is refused", () => {
    for (const thinkingLevel of ["low", "HIGH", "minimal", "Medium", "THINKING_LEVEL_UNSPECIFIED"]) {
      assert.equal(body({ contents, generationConfig: { thinkingConfig: { thinkingLevel } } }).thinkingTokens, 24_576, thinkingLevel);
    }
    for (const thinkingLevel of ["extreme", 3, ""]) {
      assert.equal(refused(() => body({ contents, generationConfig: { thinkingConfig: { thinkingLevel } } })),
        "generationConfig.thinkingConfig.thinkingLevel | generationConfig.thinkingConfig.thinkingLevel is not supported by this API: " +
        "expected one of THINKING_LEVEL_UNSPECIFIED, MINIMAL, LOW, MEDIUM, HIGH", String(thinkingLevel));
    }
    const noThinking = { ...TEXT, maxThinkingTokens: undefined };
    assert.equal(refused(() => body({ contents, generationConfig: { thinkingConfig: { thinkingBudget: 1 } } }, noThinking)).split(" | ")[0],
      "generationConfig.thinkingConfig.thinkingBudget");
    assert.equal(body({ contents, generationConfig: { thinkingConfig: { thinkingBudget: 0 } } }, noThinking).thinkingTokens, 0);
  });

  it("when thinking options set no budget, then they pass as they are and nothing more is reserved", () => {
    const built = body({ contents, generationConfig: { thinkingConfig: { includeThoughts: true } } });
    assert.deepEqual(built.body.generationConfig, { thinkingConfig: { includeThoughts: true }, maxOutputTokens: 100 });
    assert.equal(built.thinkingTokens, 0);
  });

  it("when the thinking options are not an object or name an unpriced option, then they are refused", () => {
    for (const thinkingConfig of ["x", [], null]) {
      assert.equal(refused(() => body({ contents, generationConfig: { thinkingConfig } })),
        "generationConfig.thinkingConfig | generationConfig.thinkingConfig is not supported by this API: expected an object", String(thinkingConfig));
    }
    assert.equal(refused(() => body({ contents, generationConfig: { thinkingConfig: { thinkingBudget: 1, budgetTokens: 1 } } })),
      "generationConfig.thinkingConfig.budgetTokens | generationConfig.thinkingConfig.budgetTokens is not supported by this API: not a priced thinking option");
  });
});
