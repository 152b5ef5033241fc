import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isModelGranted } from "../../../src/domain/accounts/grants.js";
import { AUTO, FAST_MODEL_ASPECT_RATIOS, FULL_ASPECT_RATIOS, ratioParts, VIDEO_ASPECT_RATIOS } from "../../../src/domain/catalog/aspect-ratios.js";
import { findModel, isServedAsText, MODELS, previewAliases, VIDEO_MODEL_ID } from "../../../src/domain/catalog/models.js";
import { imagePixelSize, videoFrameSize } from "../../../src/domain/catalog/output-size.js";
import { badRequest, DomainError, invalid } from "../../../src/domain/errors/domain-error.js";
import { checkFileAccess, signFile } from "../../../src/domain/files/signed-urls.js";
import { requestFingerprint } from "../../../src/domain/idempotency/fingerprint.js";
import { orderRoutes, parseRoutesFile, routesForModel, type Route, type RouteChoice } from "../../../src/domain/routing/routes.js";
import { checkGenerationSize, validateGenerationRequest, type GenerationRequestInput } from "../../../src/domain/validation/generation-request.js";
import { InlineImageDecoder } from "../../../src/domain/validation/inline-image-stream.js";
import { checkMetadata } from "../../../src/domain/validation/metadata.js";
import { parseInlineImage, STAGED_HEAD_BYTES } from "../../../src/domain/validation/inline-images.js";
import { imageSizeOf } from "../../../src/domain/text/media-tokens.js";
import { DEFAULT_LIMITS, type ValidationLimits } from "../../../src/domain/validation/limits.js";
import { validateTextRequest, type TextRequestInput } from "../../../src/domain/validation/text-request.js";
import { isHttpUrl } from "../../../src/domain/validation/urls.js";
import { checkVideoInteractionSize, validateVideoInteraction } from "../../../src/domain/validation/video-interaction.js";
import { frame, jpeg, png, segment } from "./image-headers.js";

/** The refusal `work` throws, or undefined when it is accepted. */
function refusal(work: () => unknown): DomainError | undefined {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return error;
  }
  return undefined;
}

/** "category:reason:field" of a refusal, or "accepted". */
function outcome(work: () => unknown): string {
  const error = refusal(work);
  return error ? `${error.category}:${error.reason}:${error.facts.field ?? ""}` : "accepted";
}

describe("catalog (spec 2.1)", () => {
  const FULL = [...FULL_ASPECT_RATIOS];
  const FAST = [...FAST_MODEL_ASPECT_RATIOS];
  const text = (id: string, maxThinkingTokens = 24_576) => ({ id, kind: "text", resolutions: [], aspectRatios: FULL, maxOutputTokens: 8192, maxThinkingTokens });

  it("when the catalog is read, then it lists the spec's models, in order, with their rules", () => {
    const shown = MODELS.map((m) => JSON.parse(JSON.stringify(m)));
    assert.deepEqual(shown, [
      { id: "aimodel-2.5-flash-image", kind: "image", resolutions: ["1K"], aspectRatios: FAST, defaultResolution: "1K", ignoresResolution: true, acceptsPreviewSuffix: true },
      { id: "aimodel-3.1-flash-image", kind: "image", resolutions: ["1K", "2K", "4K"], aspectRatios: FULL, defaultResolution: "1K", acceptsPreviewSuffix: true },
      { id: "aimodel-3-pro-image", kind: "image", resolutions: ["1K", "2K", "4K"], aspectRatios: FULL, defaultResolution: "1K", acceptsPreviewSuffix: true },
      { id: "aimodel-3.1-flash-lite-image", kind: "image", resolutions: ["1K"], aspectRatios: FULL, defaultResolution: "1K", requiresAspectRatioAndResolution: true, needsExplicitGrant: true },
      { id: "aimodel-nbx-2.1", kind: "image", resolutions: ["1K", "2K", "4K"], aspectRatios: FULL, defaultResolution: "1K", requiresAspectRatioAndResolution: true },
      text("aimodel-3-flash-preview"), text("aimodel-3.1-flash-lite"), text("aimodel-3.1-pro-preview", 32_768), text("aimodel-3.5-flash"),
      text("aimodel-3.5-flash-lite"), text("aimodel-3.6-flash"), text("aimodel-3.7-flash"),
      { id: "videomodel-3.1-generate-001", kind: "video", resolutions: ["720p", "1080p", "4k"], aspectRatios: ["16:9", "9:16", "auto"], defaultResolution: "720p", jobDurations: [4, 5, 6, 7, 8] },
      { id: "aimodel-omni-1.1-flash", kind: "multimodal_realtime", resolutions: [], aspectRatios: FULL, maxOutputTokens: 8192, maxThinkingTokens: 24_576 },
    ]);
    assert.equal(VIDEO_MODEL_ID, "videomodel-3.1-generate-001");
  });

  it("when aspect ratios are listed, then the full set adds the panoramas to the fast model's classic set, and video has two", () => {
    const classic = ["1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9"];
    assert.deepEqual(FAST, [...classic, "auto"]);
    assert.deepEqual(FULL, [...classic, "1:4", "4:1", "1:8", "8:1", "auto"]);
    assert.deepEqual([...VIDEO_ASPECT_RATIOS], ["16:9", "9:16", "auto"]);
    assert.equal(AUTO, "auto");
  });

  it("when a ratio is split, then it gives width and height; auto is square", () => {
    assert.deepEqual(ratioParts("21:9"), { w: 21, h: 9 });
    assert.deepEqual(ratioParts("auto"), { w: 1, h: 1 });
  });

  it("when a model is looked up, then its exact id or an allowed -preview alias finds it; nothing else does", () => {
    assert.equal(findModel("aimodel-3.5-flash")?.id, "aimodel-3.5-flash");
    assert.equal(findModel("aimodel-2.5-flash-image-preview")?.id, "aimodel-2.5-flash-image");
    assert.equal(findModel("aimodel-3-flash-preview")?.id, "aimodel-3-flash-preview");
    for (const unknown of ["aimodel-3-pro-image12345678", "nope-preview", "-preview", "aimodel-3.5-flash-preview", "preview-aimodel-3-pro-image", "aimodel-3-pro-image-preview-preview", ""]) {
      assert.equal(findModel(unknown), undefined, unknown);
    }
  });

  it("when a model's aliases are listed, then only image models that take -preview have one", () => {
    assert.deepEqual(previewAliases(findModel("aimodel-3-pro-image")!), ["aimodel-3-pro-image-preview"]);
    assert.deepEqual(previewAliases(findModel("aimodel-nbx-2.1")!), []);
    assert.deepEqual(previewAliases(findModel("aimodel-3.5-flash")!), []);
  });

  it("when the text API asks which models it serves, then text and the multimodal model, not image or video", () => {
    const served = MODELS.filter(isServedAsText).map((m) => m.kind);
    assert.deepEqual([...new Set(served)], ["text", "multimodal_realtime"]);
    assert.equal(isServedAsText(findModel("aimodel-3-pro-image")!), false);
    assert.equal(isServedAsText(findModel(VIDEO_MODEL_ID)!), false);
  });

  it("when a key grants models, then a named model is granted, * covers the rest, and the lite model only by name", () => {
    const lite = findModel("aimodel-3.1-flash-lite-image")!;
    assert.equal(isModelGranted(["aimodel-3.5-flash", "aimodel-3.1-flash-lite-image"], lite), true);
    assert.equal(isModelGranted(["aimodel-3.5-flash"], findModel("aimodel-3.5-flash")!), true);
    assert.equal(isModelGranted(["aimodel-3.5-flash"], findModel("aimodel-3-pro-image")!), false);
    assert.equal(isModelGranted([], findModel("aimodel-3-pro-image")!), false);
  });
});

describe("output sizes", () => {
  it("when an image is landscape or square, then its width is the resolution's long side; portrait, its height", () => {
    assert.deepEqual(imagePixelSize("1:1", "1K"), { width: 1024, height: 1024 });
    assert.deepEqual(imagePixelSize("4:3", "2K"), { width: 2048, height: 1536 });
    assert.deepEqual(imagePixelSize("3:4", "4K"), { width: 3072, height: 4096 });
    assert.deepEqual(imagePixelSize("auto", "4K"), { width: 4096, height: 4096 });
  });

  it("when a side is not a whole even number, then it is rounded to the nearest even one, at least 2", () => {
    // 1024 × 9 / 21 = 438.9 → 438; 2048 × 2 / 3 = 1365.3 → 1366
    assert.deepEqual(imagePixelSize("21:9", "1K"), { width: 1024, height: 438 });
    assert.deepEqual(imagePixelSize("2:3", "2K"), { width: 1366, height: 2048 });
    assert.deepEqual(imagePixelSize("1:2000", "1K"), { width: 2, height: 1024 });
  });

  it("when the resolution is unknown, then an image is 1K and a video 720p", () => {
    assert.deepEqual(imagePixelSize("16:9", "8K"), { width: 1024, height: 576 });
    assert.deepEqual(videoFrameSize("16:9", "8k"), { width: 1280, height: 720 });
  });

  it("when a video is 9:16, then it is portrait; any other ratio is landscape", () => {
    assert.deepEqual(videoFrameSize("9:16", "720p"), { width: 720, height: 1280 });
    assert.deepEqual(videoFrameSize("16:9", "4k"), { width: 3840, height: 2160 });
    assert.deepEqual(videoFrameSize(undefined, "1080p"), { width: 1920, height: 1080 });
  });
});

describe("errors", () => {
  it("when a refusal is made, then it carries its category, reason, message and facts", () => {
    const error = new DomainError("rate_limited", "too_many", "slow down", { limit: 3 }, 30);
    assert.equal(error.name, "DomainError");
    assert.equal(error.message, "slow down");
    assert.deepEqual([error.category, error.reason, error.facts, error.retryAfterSeconds], ["rate_limited", "too_many", { limit: 3 }, 30]);
    assert.deepEqual(new DomainError("internal", "x", "y").facts, {});
    assert.ok(error instanceof Error);
  });

  it("when the shorthands are used, then invalid is 422's category and badRequest 400's", () => {
    const a = invalid("r", "m", { field: "f" });
    const b = badRequest("invalid_limit", "m2");
    assert.deepEqual([a.category, a.reason, a.message, a.facts], ["invalid", "r", "m", { field: "f" }]);
    assert.deepEqual([b.category, b.reason, b.message, b.facts], ["bad_request", "invalid_limit", "m2", {}]);
  });
});

describe("signed file links", () => {
  const secret = Buffer.from("s3cret");
  const signature = signFile(secret, "outputs/a.png", 100);

  it("when a link expires exactly now, then it is still granted; a second later, expired", () => {
    assert.equal(checkFileAccess(secret, "outputs/a.png", 100, signature, 100), "granted");
    assert.equal(checkFileAccess(secret, "outputs/a.png", 100, signature, 101), "expired");
  });

  it("when the signature is altered in any way, then access is refused", () => {
    assert.match(signature, /^[0-9a-f]{64}$/);
    const flipped = (signature[0] === "0" ? "1" : "0") + signature.slice(1);
    for (const bad of [signature.toUpperCase(), `${signature}zz`, `zz${signature}`, signature.slice(0, 62), flipped, "", `${signature}00`]) {
      assert.equal(checkFileAccess(secret, "outputs/a.png", 100, bad, 0), "bad_signature", bad);
    }
    assert.equal(checkFileAccess(Buffer.from("other"), "outputs/a.png", 100, signature, 0), "bad_signature");
  });

  it("when key and expiry are moved across their separator, then the signature differs", () => {
    assert.notEqual(signFile(secret, "a1", 23), signFile(secret, "a", 123));
  });
});

describe("idempotency fingerprints", () => {
  const fp = (request: unknown, operation = "op") => requestFingerprint(operation, request);

  it("when the request is the same up to key order at any depth, including inside arrays, then the fingerprint is the same", () => {
    assert.equal(fp({ list: [{ b: 1, a: 2 }] }), fp({ list: [{ a: 2, b: 1 }] }));
    assert.match(fp({}), /^[0-9a-f]{64}$/);
  });

  it("when array order or a scalar differs, then the fingerprint differs", () => {
    assert.notEqual(fp([1, 2]), fp([2, 1]));
    assert.notEqual(fp([1, 2]), fp({ 0: 1, 1: 2 }));
    assert.notEqual(fp(1), fp(2));
    assert.notEqual(fp("a"), fp("b"));
    assert.notEqual(fp({ a: null }), fp({}));
  });

  it("when a field is undefined, then it is as if it were absent", () => {
    assert.equal(fp({ a: 1, b: undefined }), fp({ a: 1 }));
    assert.notEqual(fp({ a: 1, b: 2 }), fp({ a: 1 }));
  });

  it("when bytes or bigints are sent, then they count by value, as base64 and decimal text", () => {
    assert.equal(fp({ image: Uint8Array.from([1, 2, 3]) }), fp({ image: "AQID" }));
    assert.notEqual(fp({ image: Uint8Array.from([1, 2, 3]) }), fp({ image: Uint8Array.from([1, 2, 4]) }));
    assert.equal(fp({ amount: 5n }), fp({ amount: "5" }));
    assert.equal(fp([7n]), fp(["7"]));
  });

  it("when operation and request would run together, then the fingerprints still differ", () => {
    assert.notEqual(fp(12, "op"), fp(2, "op1"));
  });
});

describe("upstream routes", () => {
  const route = (name: string, weight: number, extra: Partial<Route> = {}): Route => ({
    name, baseUrl: `https://${name}.example`, apiKey: "k", weight, timeoutMs: 1000, maxInputImages: 100, models: ["*"], ...extra,
  });
  const choice = (extra: Partial<RouteChoice> = {}): RouteChoice => ({
    paused: new Set(), unhealthy: new Set(), imageCount: 0, random: () => 0, ...extra,
  });
  const names = (routes: readonly Route[]) => routes.map((r) => r.name);

  it("when routes are filtered for a model, then those naming it or * serve it", () => {
    const routes = [route("all", 1), route("text", 1, { models: ["aimodel-3.5-flash"] }), route("img", 1, { models: ["aimodel-3-pro-image"] })];
    assert.deepEqual(names(routesForModel(routes, "aimodel-3.5-flash")), ["all", "text"]);
  });

  it("when no route is preferred, then one is drawn by weight and the others follow by weight", () => {
    const routes = [route("light", 1), route("heavy", 3), route("mid", 2)];
    // Total weight 6, sorted heavy 3, mid 2, light 1: [0, 0.5) heavy, [0.5, 0.8333) mid, the rest light.
    assert.deepEqual(names(orderRoutes(routes, choice({ random: () => 0 }))), ["heavy", "mid", "light"]);
    assert.deepEqual(names(orderRoutes(routes, choice({ random: () => 0.49 }))), ["heavy", "mid", "light"]);
    assert.deepEqual(names(orderRoutes(routes, choice({ random: () => 0.5 }))), ["mid", "heavy", "light"]);
    assert.deepEqual(names(orderRoutes(routes, choice({ random: () => 0.9 }))), ["light", "heavy", "mid"]);
  });

  it("when a random source returns the top of its range, then the last route is still taken", () => {
    assert.deepEqual(names(orderRoutes([route("a", 1), route("b", 1)], choice({ random: () => 1 }))), ["b", "a"]);
  });

  it("when a route is preferred, then it goes first even when failing; the rest keep their order", () => {
    const routes = [route("a", 3), route("b", 2), route("c", 1)];
    assert.deepEqual(names(orderRoutes(routes, choice({ preferred: "c", random: () => 0 }))), ["c", "a", "b"]);
    assert.deepEqual(names(orderRoutes(routes, choice({ preferred: "b", unhealthy: new Set(["b"]) }))), ["b", "a", "c"]);
  });

  it("when routes failed recently, then they come after the healthy ones, by weight", () => {
    const routes = [route("bad-light", 1), route("good", 1), route("bad-heavy", 5)];
    assert.deepEqual(names(orderRoutes(routes, choice({ unhealthy: new Set(["bad-light", "bad-heavy"]) }))), ["good", "bad-heavy", "bad-light"]);
    // Only failing routes left: one of them is drawn by weight.
    const failing = [route("x", 1), route("y", 3)];
    assert.deepEqual(names(orderRoutes(failing, choice({ unhealthy: new Set(["x", "y"]), random: () => 0.9 }))), ["x", "y"]);
  });

  it("when a route is paused or takes fewer images than the request has, then it is never used; exactly as many is fine", () => {
    const routes = [route("paused", 9), route("small", 5, { maxInputImages: 2 }), route("exact", 1, { maxInputImages: 3 })];
    assert.deepEqual(names(orderRoutes(routes, choice({ paused: new Set(["paused"]), imageCount: 3, preferred: "paused" }))), ["exact"]);
    assert.deepEqual(names(orderRoutes(routes, choice({ paused: new Set(["paused"]), imageCount: 2 }))), ["small", "exact"]);
    assert.deepEqual(orderRoutes(routes, choice({ imageCount: 4, paused: new Set(["paused"]) })), []);
  });

  it("when every route is on standby (weight 0), then the first is used and the others follow", () => {
    const routes = [route("s1", 0), route("s2", 0)];
    assert.deepEqual(names(orderRoutes(routes, choice({ random: () => 0.99 }))), ["s1", "s2"]);
  });

  const defaults = { timeoutMs: 5000, maxInputImages: 30 };
  const entry = (extra: Record<string, unknown> = {}) => ({ name: "r1", base_url: "https://up.example", api_key: "secret", ...extra });
  const parse = (...entries: Record<string, unknown>[]) => parseRoutesFile({ routes: entries } as never, defaults, { KEY: "from-env", EMPTY: "" });
  const parseError = (...entries: Record<string, unknown>[]) => {
    try {
      parse(...entries);
    } catch (error) {
      return (error as Error).message;
    }
    return "accepted";
  };

  it("when a route names only what it must, then the defaults fill the rest and a trailing slash is dropped", () => {
    assert.deepEqual(parse(entry({ base_url: "http://up.example//" })), [
      { name: "r1", baseUrl: "http://up.example", apiKey: "secret", weight: 1, timeoutMs: 5000, maxInputImages: 30, models: ["*"] },
    ]);
    assert.deepEqual(parse(entry({ models: [] }))[0]!.models, ["*"]);
  });

  it("when a route sets its own figures and models, then they are kept; its key may come from the environment", () => {
    assert.deepEqual(parse(entry({ api_key: undefined, api_key_env: "KEY", weight: 0, timeout_ms: 1, max_input_images: 1, models: ["m"] })), [
      { name: "r1", baseUrl: "https://up.example", apiKey: "from-env", weight: 0, timeoutMs: 1, maxInputImages: 1, models: ["m"] },
    ]);
  });

  it("when the file has no routes, then it is refused", () => {
    for (const file of [undefined, {}, { routes: "r" }, { routes: [] }]) {
      assert.throws(() => parseRoutesFile(file as never, defaults, {}), { message: 'the routes file needs a non-empty "routes" array' });
    }
  });

  it("when a route is malformed, then the refusal names the route and what is wrong", () => {
    assert.equal(parseError(entry({ name: "" })), 'routes[0]: a unique "name" is required');
    assert.equal(parseError(entry(), entry()), 'routes[1]: a unique "name" is required');
    for (const url of ["ftp://up.example", "up.example", " https://up.example", undefined]) {
      assert.equal(parseError(entry({ base_url: url })), 'routes[0]: "base_url" must be an http(s) URL', String(url));
    }
    for (const key of [{ api_key: undefined }, { api_key: "" }, { api_key: undefined, api_key_env: "UNSET" }, { api_key: undefined, api_key_env: "EMPTY" }]) {
      assert.equal(parseError(entry(key)), 'routes[0]: "api_key" or "api_key_env" (naming a set variable) is required');
    }
  });

  it("when a figure is not a whole number at or above its minimum, then it is refused; the minimum itself is fine", () => {
    assert.equal(parseError(entry({ weight: -1 })), 'routes[0]: "weight" must be an integer ≥ 0');
    assert.equal(parseError(entry({ weight: 1.5 })), 'routes[0]: "weight" must be an integer ≥ 0');
    assert.equal(parseError(entry({ timeout_ms: 0 })), 'routes[0]: "timeout_ms" must be an integer ≥ 1');
    assert.equal(parseError(entry({ max_input_images: 0 })), 'routes[0]: "max_input_images" must be an integer ≥ 1');
    assert.equal(parseError(entry({ timeout_ms: 1, max_input_images: 1, weight: 0 })), "accepted");
  });
});

describe("URLs", () => {
  it("when a URL is absolute http or https with a host, then it is accepted, in any letter case", () => {
    for (const url of ["http://a.example", "https://a.example/x?y=1", "HTTPS://A.EXAMPLE"]) assert.equal(isHttpUrl(url), true, url);
  });

  it("when a URL has another scheme, no host, or leading text, then it is refused", () => {
    for (const url of ["ftp://a.example", "http:/a.example", "http://", " http://a.example", "xhttp://a.example", "https//a.example", "http://a b"]) {
      assert.equal(isHttpUrl(url), false, url);
    }
  });
});

describe("inline images", () => {
  it("when a data URI names a media type, then it is kept, with any parameters before base64", () => {
    for (const [value, mime] of [
      ["data:image/png;base64,AAAA", "image/png"],
      ["DATA:Image/SVG+xml;BASE64,AAAA", "Image/SVG+xml"],
      ["data:image/vnd.x-y;name=a.png;q=;base64,AAAA", "image/vnd.x-y"],
      ["data:;base64,AAAA", "application/octet-stream"],
      ["AAAA", "application/octet-stream"],
    ] as const) {
      const image = parseInlineImage(value, 0);
      assert.equal(image.mimeType, mime, value);
      assert.equal(image.base64, "AAAA", value);
      assert.equal(image.decodedBytes, 3, value);
    }
  });

  it("when the base64 is padded, then the decoded size leaves the padding out", () => {
    assert.equal(parseInlineImage("AAAAAA==", 0).decodedBytes, 4);
    assert.equal(parseInlineImage("AAAAAAA=", 0).decodedBytes, 5);
    assert.equal(parseInlineImage("AAAAAAAA", 0).decodedBytes, 6);
    assert.equal(parseInlineImage(" AA\nAA\t", 0).base64, "AAAA");
    assert.equal(parseInlineImage("ab-_", 0).decodedBytes, 3);
  });

  it("when a staged image keeps its first 64 KiB, then a JPEG whose frame follows 60 KiB of metadata is still measured", () => {
    const exif = segment(0xe1, new Array(30_000).fill(0));
    const image = jpeg(exif, exif, frame(0xc0, 4000, 3000), new Array(100_000).fill(0));
    assert.equal(STAGED_HEAD_BYTES, 64 * 1024);
    assert.deepEqual(imageSizeOf(image.subarray(0, STAGED_HEAD_BYTES)), { width: 4000, height: 3000 });
  });

  it("when a data URI's prefix is malformed, then the whole text is taken as base64 and refused", () => {
    for (const bad of ["xdata:image/png;base64,AAAA", "data:image/png,AAAA", "data:image;base64,AAAA", "data:image/png;charset;base64,AAAA"]) {
      assert.equal(outcome(() => parseInlineImage(bad, 2)), "invalid:invalid_input_image:input_images_base64[2]", bad);
    }
    assert.equal(refusal(() => parseInlineImage("A=A", 2))?.message, "input_images_base64[2] is not base64 or a base64 data URI");
  });
});

describe("inline images decoded as they arrive: when bytes come out", () => {
  const PREFIX = "data:image/png;base64,";
  const refusedField = (work: () => unknown) => outcome(work).split(":").slice(1).join(":");

  it("when 256 characters arrive without a comma, then it is plain base64 and decoded at once; 255 may still be a prefix", () => {
    assert.equal(new InlineImageDecoder(0).feed("A".repeat(256)).length, 192);
    assert.equal(new InlineImageDecoder(0).feed("A".repeat(255)).length, 0);
  });

  it("when the data URI's prefix has passed, then each later piece is decoded as it arrives", () => {
    const decoder = new InlineImageDecoder(0);
    assert.equal(decoder.feed(`${PREFIX}AAAA`).length, 3);
    assert.equal(decoder.feed("AAAA").length, 3);
    assert.equal(decoder.feed("AA").length, 0);
    assert.equal(decoder.finish().length, 1);
    assert.equal(decoder.decodedBytes, 7);
  });

  it("when the last piece ends in padding, then all but its last group are decoded at once and the rest at finish", () => {
    const decoder = new InlineImageDecoder(0);
    assert.equal(decoder.feed(`${PREFIX}${"AAAA".repeat(250)}AA==`).length, 750);
    assert.equal(decoder.finish().length, 1);
  });

  it("when finish is called again, then nothing more comes out", () => {
    const decoder = new InlineImageDecoder(0);
    decoder.feed(`${PREFIX}AAAAAA`);
    assert.equal(decoder.finish().length, 1);
    assert.equal(decoder.finish().length, 0);
  });

  it("when data follows the padding in a later piece, then the image is refused with its field named", () => {
    for (const pieces of [["AAAA", "==AB"], ["AAAAAA=", "A"], ["AAAAAA", "=", "A"]]) {
      const decoder = new InlineImageDecoder(4);
      const work = () => {
        decoder.feed(PREFIX);
        for (const piece of pieces) decoder.feed(piece);
        decoder.finish();
      };
      assert.equal(refusedField(work), "invalid_input_image:input_images_base64[4]", pieces.join(" | "));
    }
    assert.equal(refusal(() => new InlineImageDecoder(4).finish())?.message, "input_images_base64[4] is not base64 or a base64 data URI");
  });
});

describe("metadata refusals", () => {
  const limits = { maxKeys: 64, maxKeyBytes: 4, maxValueBytes: 100, maxTotalBytes: 1000 };

  it("when a key of 32 characters is too long, then it is shown whole; of 33, cut after 32", () => {
    const k32 = "k".repeat(32);
    assert.equal(refusal(() => checkMetadata({ [k32]: 1 }, limits))?.message, `metadata key "${k32}" is longer than 4 bytes of UTF-8`);
    assert.equal(refusal(() => checkMetadata({ [`${k32}x`]: 1 }, limits))?.message, `metadata key "${k32}…" is longer than 4 bytes of UTF-8`);
  });
});

describe("job requests", () => {
  const LIMITS: ValidationLimits = { ...DEFAULT_LIMITS, maxInputImages: 3, maxInputBytes: 10 };
  const request = (model: string, extra: Partial<GenerationRequestInput> = {}): GenerationRequestInput => ({
    model, prompt: "a cat", inputImagesUrls: [], inputImagesBase64: [], ...extra,
  });
  const validate = (model: string, extra: Partial<GenerationRequestInput> = {}) => validateGenerationRequest(request(model, extra), LIMITS);
  const check = (model: string, extra: Partial<GenerationRequestInput> = {}) => outcome(() => validate(model, extra));
  const staged = (decodedBytes: number) => ({ mimeType: "image/png", ref: "r", decodedBytes, digest: "d", head: png(1, 1) });
  const PRO = "aimodel-3-pro-image";
  const VIDEO = "videomodel-3.1-generate-001";

  it("when an image request names only model and prompt, then the defaults are filled in", () => {
    assert.deepEqual(validate(PRO), {
      model: findModel(PRO), prompt: "a cat", timeoutSeconds: 1200, callbackUrl: undefined, metadata: undefined,
      aspectRatio: undefined, resolution: "1K", inputImageUrls: [], inlineImages: [],
    });
  });

  it("when an image request sets every field, then each is kept as normalized", () => {
    const spec = validate(PRO, {
      aspectRatio: "21:9", resolution: "4k", timeout: 30, callbackUrl: "https://hook.example/x", metadata: { a: 1 },
      inputImagesUrls: ["https://in.example/1.png"], inputImagesBase64: ["AAAA"],
    });
    assert.deepEqual(spec, {
      model: findModel(PRO), prompt: "a cat", timeoutSeconds: 30, callbackUrl: "https://hook.example/x", metadata: { a: 1 },
      aspectRatio: "21:9", resolution: "4K", inputImageUrls: ["https://in.example/1.png"],
      inlineImages: [{ mimeType: "application/octet-stream", base64: "AAAA", decodedBytes: 3 }],
    });
  });

  it("when the model is missing or unknown, then it is refused", () => {
    assert.equal(check(""), "invalid:missing_model:model");
    assert.equal(refusal(() => validate(""))?.message, "model is required");
    assert.equal(refusal(() => validate("aimodel-nope"))?.message, 'unknown model "aimodel-nope"');
    assert.equal(check("aimodel-nope"), "invalid:unknown_model:model");
  });

  it("when the prompt has one character, then it is accepted; none left after null bytes, refused", () => {
    assert.equal(validate(PRO, { prompt: "x" }).prompt, "x");
    assert.equal(refusal(() => validate(PRO, { prompt: "" }))?.message, "prompt must contain at least 1 character");
    assert.equal(check(PRO, { prompt: "\u0000\u0000" }), "invalid:invalid_prompt:prompt");
  });

  it("when the timeout is at either end of 30 to 1200 seconds, then it is accepted; one beyond, or a fraction, refused", () => {
    assert.equal(validate(PRO, { timeout: 30 }).timeoutSeconds, 30);
    assert.equal(validate(PRO, { timeout: 1200 }).timeoutSeconds, 1200);
    for (const timeout of [29, 1201, 30.5]) assert.equal(check(PRO, { timeout }), "invalid:invalid_timeout:timeout", String(timeout));
    assert.equal(refusal(() => validate(PRO, { timeout: 29 }))?.message, "timeout must be an integer from 30 to 1200 seconds");
  });

  it("when the callback URL is empty, then there is none; when it is not http(s), it is refused", () => {
    assert.equal(validate(PRO, { callbackUrl: "" }).callbackUrl, undefined);
    assert.equal(check(PRO, { callbackUrl: "ftp://hook.example" }), "invalid:invalid_callback_url:callback_url");
    assert.equal(refusal(() => validate(PRO, { callbackUrl: "x" }))?.message, "callback_url must be an http:// or https:// URL");
  });

  it("when metadata breaks its limits, then the size check refuses it", () => {
    const tooMany = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i]));
    assert.equal(outcome(() => checkGenerationSize(request(PRO, { metadata: tooMany }), DEFAULT_LIMITS)), "invalid:metadata_too_large:metadata");
  });

  it("when an aspect ratio is empty or auto, then none is sent; one the model lacks is refused, listing what it has", () => {
    assert.equal(validate(PRO, { aspectRatio: "" }).aspectRatio, undefined);
    assert.equal(validate(PRO, { aspectRatio: "auto" }).aspectRatio, undefined);
    assert.equal(validate("aimodel-2.5-flash-image", { aspectRatio: "21:9" }).aspectRatio, "21:9");
    assert.equal(check("aimodel-2.5-flash-image", { aspectRatio: "1:4" }), "invalid:unsupported_aspect_ratio:aspect_ratio");
    assert.equal(refusal(() => validate(VIDEO, { aspectRatio: "1:1" }))?.message,
      'videomodel-3.1-generate-001 does not support aspect_ratio "1:1" (supported: 16:9, 9:16, auto)');
  });

  it("when a model needs aspect ratio and resolution, then a request lacking either is refused", () => {
    for (const model of ["aimodel-3.1-flash-lite-image", "aimodel-nbx-2.1"]) {
      assert.equal(check(model, { resolution: "1K" }), "invalid:missing_aspect_ratio:aspect_ratio", model);
      assert.equal(check(model, { aspectRatio: "1:1", resolution: "" }), "invalid:missing_resolution:resolution", model);
      assert.equal(validate(model, { aspectRatio: "1:1", resolution: "1k" }).resolution, "1K", model);
    }
    assert.equal(refusal(() => validate("aimodel-nbx-2.1", { resolution: "1K" }))?.message, "aimodel-nbx-2.1 requires aspect_ratio");
    assert.equal(refusal(() => validate("aimodel-nbx-2.1", { aspectRatio: "1:1" }))?.message, "aimodel-nbx-2.1 requires resolution");
  });

  it("when the fast image model is asked for a resolution, then it renders 1K whatever was asked", () => {
    for (const resolution of ["4K", "bogus", undefined]) assert.equal(validate("aimodel-2.5-flash-image", { resolution }).resolution, "1K");
  });

  it("when an image resolution is not the model's, then it is refused, listing the model's", () => {
    assert.equal(refusal(() => validate(PRO, { resolution: "8K" }))?.message, 'aimodel-3-pro-image does not support resolution "8K" (supported: 1K, 2K, 4K)');
    assert.equal(check("aimodel-3.1-flash-lite-image", { aspectRatio: "1:1", resolution: "2K" }), "invalid:unsupported_resolution:resolution");
  });

  it("when a video request names only model and prompt, then it is a 4-second 720p 16:9 clip", () => {
    assert.deepEqual(validate(VIDEO), {
      model: findModel(VIDEO), prompt: "a cat", timeoutSeconds: 1200, callbackUrl: undefined, metadata: undefined,
      aspectRatio: "16:9", resolution: "720p", durationSeconds: 4, inputImageUrls: [], inlineImages: [],
    });
  });

  it("when a video's resolution is written in another case or by its legacy name, then it is normalized", () => {
    assert.equal(validate(VIDEO, { resolution: "1k" }).resolution, "720p");
    assert.equal(validate(VIDEO, { resolution: "" }).resolution, "720p");
    assert.equal(validate(VIDEO, { resolution: "1080P" }).resolution, "1080p");
    assert.equal(validate(VIDEO, { resolution: "4K" }).resolution, "4k");
    assert.equal(refusal(() => validate(VIDEO, { resolution: "2K" }))?.message, 'video resolution must be one of 720p, 1080p, 4k (got "2K")');
    assert.equal(check(VIDEO, { resolution: "2K" }), "invalid:unsupported_resolution:resolution");
  });

  it("when a high-resolution video names no duration, then it is 8 seconds; any other duration is refused with 400", () => {
    assert.equal(validate(VIDEO, { resolution: "1080p" }).durationSeconds, 8);
    assert.equal(validate(VIDEO, { resolution: "4k" }).durationSeconds, 8);
    assert.equal(check(VIDEO, { resolution: "4k", durationSeconds: 7 }), "bad_request:video_duration_requires_8s:duration_seconds");
    assert.equal(refusal(() => validate(VIDEO, { resolution: "1080p", durationSeconds: 6 }))?.message, "1080p video is only made in 8-second clips (got 6)");
  });

  it("when a 720p video lasts 4 or 8 seconds, then it is accepted; 3, 9 or a fraction, refused", () => {
    assert.equal(validate(VIDEO, { durationSeconds: 4 }).durationSeconds, 4);
    assert.equal(validate(VIDEO, { durationSeconds: 8 }).durationSeconds, 8);
    for (const durationSeconds of [3, 9, 4.5]) assert.equal(check(VIDEO, { durationSeconds }), "invalid:invalid_duration:duration_seconds");
    assert.equal(refusal(() => validate(VIDEO, { durationSeconds: 9 }))?.message, "duration_seconds must be an integer from 4 to 8");
  });

  it("when a video is portrait or auto, then it keeps 9:16 or falls back to 16:9", () => {
    assert.equal(validate(VIDEO, { aspectRatio: "9:16" }).aspectRatio, "9:16");
    assert.equal(validate(VIDEO, { aspectRatio: "auto" }).aspectRatio, "16:9");
  });

  it("when a text job sends aspect ratio and resolution, then they are accepted and ignored", () => {
    assert.deepEqual(validate("aimodel-3.5-flash", { aspectRatio: "auto", resolution: "1K", inputImagesUrls: ["https://in.example/a"] }), {
      model: findModel("aimodel-3.5-flash"), prompt: "a cat", timeoutSeconds: 1200, callbackUrl: undefined, metadata: undefined,
      inputImageUrls: ["https://in.example/a"], inlineImages: [],
    });
  });

  it("when the multimodal model gets a job request, then it is validated like a text job", () => {
    assert.deepEqual(validate("aimodel-omni-1.1-flash", { inputImagesBase64: ["AAAA"] }), {
      model: findModel("aimodel-omni-1.1-flash"), prompt: "a cat", timeoutSeconds: 1200, callbackUrl: undefined, metadata: undefined,
      inputImageUrls: [], inlineImages: [{ mimeType: "application/octet-stream", base64: "AAAA", decodedBytes: 3 }],
    });
  });

  it("when nothing is configured, then a request takes at most 100 input images of 200 MiB in all", () => {
    assert.equal(DEFAULT_LIMITS.maxInputImages, 100);
    assert.equal(DEFAULT_LIMITS.maxInputBytes, 200 * 1024 * 1024);
  });

  it("when a request has exactly the most input images, then it is accepted; one more of any kind, refused", () => {
    assert.equal(check(PRO, { inputImagesUrls: ["https://a.example/1"], inputImagesBase64: ["AA=="], stagedImages: [staged(1)] }), "accepted");
    const over = { inputImagesUrls: ["https://a.example/1"], inputImagesBase64: ["AA=="], stagedImages: [staged(1), staged(1)] };
    assert.equal(check(PRO, over), "invalid:too_many_input_images:input_images_urls");
    const error = refusal(() => validate(PRO, over));
    assert.equal(error?.message, "at most 3 input images per request (got 4)");
    assert.equal(error?.facts.limit, 3);
    assert.equal(check(VIDEO, { inputImagesUrls: ["https://a.example/1", "https://a.example/2", "https://a.example/3", "https://a.example/4"] }),
      "invalid:too_many_input_images:input_images_urls");
    assert.equal(check("aimodel-3.5-flash", { inputImagesBase64: ["AA==", "AA==", "AA==", "AA=="] }), "invalid:too_many_input_images:input_images_urls");
  });

  it("when inline images total exactly the byte limit, then they are accepted; one byte more, refused", () => {
    // Staged 5 bytes + base64 "AAAAAA==" 4 bytes + "AA==" 1 byte = 10; "AAA=" is 2 bytes, 11 in all.
    const spec = validate(PRO, { stagedImages: [staged(5)], inputImagesBase64: ["AAAAAA==", "AA=="] });
    assert.deepEqual(spec.inlineImages.map((i) => i.decodedBytes), [5, 4, 1]);
    const error = refusal(() => validate(PRO, { stagedImages: [staged(5)], inputImagesBase64: ["AAAAAA==", "AAA="] }));
    assert.equal(error?.reason, "input_too_large");
    assert.equal(error?.message, "input images total 11 bytes; the limit is 10 bytes (200 MiB)");
    assert.deepEqual(error?.facts, { limit: 10 });
  });

  it("when an inline image after staged ones is not base64, then its field counts the staged ones too", () => {
    assert.equal(check(PRO, { stagedImages: [staged(1)], inputImagesBase64: ["AA==", "!!"] }), "invalid:invalid_input_image:input_images_base64[2]");
  });

  it("when an input image URL is not http(s), then it is refused naming its index", () => {
    assert.equal(check(PRO, { inputImagesUrls: ["https://a.example/1", "file:///etc/passwd"] }), "invalid:invalid_input_image_url:input_images_urls[1]");
    assert.equal(refusal(() => validate(PRO, { inputImagesUrls: ["x"] }))?.message, "input_images_urls[0] must be an http:// or https:// URL");
  });

  it("when an endpoint takes text only, then any input image is refused; without images it is accepted", () => {
    assert.equal(check(PRO, { inputMode: "text_only" }), "accepted");
    for (const images of [{ inputImagesUrls: ["https://a.example/1"] }, { inputImagesBase64: ["AAAA"] }, { stagedImages: [staged(1)] }]) {
      const error = refusal(() => validate(PRO, { inputMode: "text_only", ...images }));
      assert.equal(error?.reason, "input_images_not_allowed");
      assert.equal(error?.message, "this endpoint generates from text only; use url-generations for input images");
    }
  });

  it("when an endpoint takes image URLs, then it needs at least one", () => {
    assert.equal(check(PRO, { inputMode: "image_urls", inputImagesBase64: ["AAAA"] }), "invalid:missing_input_image_urls:input_images_urls");
    assert.equal(refusal(() => validate(PRO, { inputMode: "image_urls" }))?.message, "input_images_urls must name at least one image");
    assert.equal(check(PRO, { inputMode: "image_urls", inputImagesUrls: ["https://a.example/1"] }), "accepted");
  });
});

describe("text requests", () => {
  const request = (extra: Partial<TextRequestInput> = {}): TextRequestInput => ({
    model: "aimodel-3.5-flash", contents: [{ role: "user", parts: [{ text: "abcd" }] }], ...extra,
  });
  const validate = (extra: Partial<TextRequestInput> = {}) => validateTextRequest(request(extra), DEFAULT_LIMITS);
  const check = (extra: Partial<TextRequestInput> = {}) => outcome(() => validate(extra));

  it("when a text request is valid, then the prompt joins the system instruction and the parts' text, null bytes stripped", () => {
    const spec = validate({
      systemInstruction: { parts: [{ text: "sys" }, {}] },
      contents: [{ role: "user", parts: [{ text: "a\u0000b" }, { text: "" }] }, { role: "model", parts: [{ text: "cd" }] }],
    });
    assert.deepEqual(spec, {
      model: findModel("aimodel-3.5-flash"), promptText: "sys\nab\ncd", promptTokens: 3, reservedPromptTokens: 3, maxOutputTokens: 8192, media: [],
    });
  });

  it("when the model is not a text model, then it is refused, pointing to the jobs API", () => {
    const error = refusal(() => validate({ model: "aimodel-3-pro-image" }));
    assert.equal(error?.reason, "unsupported_model");
    assert.equal(error?.message, "aimodel-3-pro-image is not a text model; create a job with POST /api/v1/generations");
    assert.deepEqual(error?.facts, { field: "model" });
    assert.equal(validate({ model: "aimodel-omni-1.1-flash" }).model.id, "aimodel-omni-1.1-flash");
  });

  it("when there are no contents or no text in them, then it is refused", () => {
    assert.equal(check({ contents: [] }), "invalid:invalid_contents:contents");
    assert.equal(check({ contents: [{ role: "user", parts: [{ text: "" }] }] }), "invalid:invalid_contents:contents");
    assert.equal(refusal(() => validate({ contents: [] }))?.message, "contents must hold at least one content");
    assert.equal(refusal(() => validate({ contents: [{ role: "user", parts: [{ text: "\u0000" }, {}] }] }))?.message,
      "contents must hold at least one non-empty text part");
  });

  it("when maxOutputTokens is 1 or the model's most, then it is kept; 0, one more or a fraction, refused", () => {
    assert.equal(validate({ maxOutputTokens: 1 }).maxOutputTokens, 1);
    assert.equal(validate({ maxOutputTokens: 8192 }).maxOutputTokens, 8192);
    for (const maxOutputTokens of [0, 8193, 1.5]) {
      assert.equal(check({ maxOutputTokens }), "invalid:invalid_max_output_tokens:generationConfig.maxOutputTokens", String(maxOutputTokens));
    }
    assert.equal(refusal(() => validate({ maxOutputTokens: 0 }))?.message, "generationConfig.maxOutputTokens must be from 1 to 8192");
  });

  it("when candidateCount is 1 or absent, then it is accepted; any other count, refused", () => {
    assert.equal(check({ candidateCount: 1 }), "accepted");
    assert.equal(check({ candidateCount: 2 }), "invalid:invalid_candidate_count:generationConfig.candidateCount");
    assert.equal(refusal(() => validate({ candidateCount: 0 }))?.message, "only candidateCount 1 is supported");
  });

  it("when one part has exactly as many characters as the limit but more bytes, then it is refused", () => {
    const limits = { ...DEFAULT_LIMITS, maxPromptBytes: { ...DEFAULT_LIMITS.maxPromptBytes, text: 13 } };
    const parts = (text: string) => ({ model: "aimodel-3.5-flash", contents: [{ role: "user", parts: [{ text }] }] });
    assert.equal(outcome(() => validateTextRequest(parts(`${"a".repeat(12)}é`), limits)), "invalid:prompt_too_long:contents");
    assert.equal(outcome(() => validateTextRequest(parts("a".repeat(13)), limits)), "accepted");
  });

  it("when inline media is sent, then the reservation counts it by its kind", () => {
    const spec = validate({
      systemInstruction: { parts: [{ inlineData: { mimeType: "text/plain", bytes: 100 } }] },
      contents: [{ role: "user", parts: [{ text: "abcd" }, { inlineData: { mimeType: "audio/wav", bytes: 80 } }] }],
    });
    assert.equal(spec.promptTokens, 1);
    assert.equal(spec.reservedPromptTokens, 1 + 100 + 10);
  });

  it("when inline media is of a type the reservation cannot bound, then it is refused with 400 naming the part", () => {
    const pdf = { inlineData: { mimeType: "application/pdf", bytes: 1 } };
    const error = refusal(() => validate({ contents: [{ role: "user", parts: [{ text: "a" }] }, { role: "user", parts: [{ text: "b" }, pdf] }] }));
    assert.equal(error?.category, "bad_request");
    assert.equal(error?.reason, "unsupported_media_type");
    assert.equal(error?.facts.field, "contents[1].parts[1].inlineData.mimeType");
    assert.equal(error?.message, 'contents[1].parts[1].inlineData.mimeType "application/pdf" is not supported: send images, audio, video or text');
    assert.equal(check({ systemInstruction: { parts: [pdf] } }), "bad_request:unsupported_media_type:systemInstruction.parts[0].inlineData.mimeType");
  });
});

describe("video interactions", () => {
  const VIDEO = "videomodel-3.1-generate-001";
  const validate = (extra: Record<string, unknown> = {}) =>
    validateVideoInteraction({ model: VIDEO, instances: [{ prompt: "a wave" }], ...extra }, DEFAULT_LIMITS);
  const check = (extra: Record<string, unknown> = {}) => outcome(() => validate(extra));

  it("when one instance is sent, then it is a 720p 16:9 clip of the default 4 seconds with no input images", () => {
    assert.deepEqual(validate(), {
      model: findModel(VIDEO), prompt: "a wave", durationSeconds: 4, resolution: "720p", aspectRatio: "16:9",
      inputImageUrls: [], inlineImages: [], timeoutSeconds: 1200,
    });
    assert.equal(validate({ parameters: {} }).durationSeconds, 4);
  });

  it("when the duration is 1 or 8 seconds, then it is accepted; 0, 9 or a fraction, refused", () => {
    assert.equal(validate({ parameters: { durationSeconds: 8 } }).durationSeconds, 8);
    for (const durationSeconds of [0, 9, 2.5]) {
      assert.equal(check({ parameters: { durationSeconds } }), "invalid:invalid_duration:parameters.durationSeconds", String(durationSeconds));
    }
    assert.equal(refusal(() => validate({ parameters: { durationSeconds: 9 } }))?.message, "parameters.durationSeconds must be an integer from 1 to 8");
  });

  it("when another model is named, then the endpoint refuses it", () => {
    assert.equal(check({ model: "aimodel-3.5-flash" }), "invalid:unsupported_model:model");
    assert.equal(refusal(() => validate({ model: "aimodel-3-pro-image-preview" }))?.message,
      "the interactions endpoint serves only videomodel-3.1-generate-001");
    assert.equal(outcome(() => checkVideoInteractionSize({ model: "nope", instances: [] }, DEFAULT_LIMITS)), "invalid:unknown_model:model");
  });

  it("when there is not exactly one instance, then it is refused with the count", () => {
    assert.equal(refusal(() => validate({ instances: [] }))?.message, "instances must hold exactly one object (got 0)");
    assert.equal(check({ instances: [{ prompt: "a" }, { prompt: "b" }] }), "invalid:invalid_instances:instances");
  });

  it("when the instance's prompt is only null bytes, then it is refused naming the instance's field", () => {
    const error = refusal(() => validate({ instances: [{ prompt: "\u0000" }] }));
    assert.equal(error?.reason, "invalid_prompt");
    assert.equal(error?.message, "instances[0].prompt must contain at least 1 character");
  });
});
