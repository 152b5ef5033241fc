// backends: embedded
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { inflateSync } from "node:zlib";
import { PNG } from "pngjs";
import { paintScene, renderPng, sceneFromSeed } from "../../src/adapters/provider/simulated/render-png.js";
import { DEFAULT_FPS, MAX_VIDEO_SIDE, renderMp4, yuvFrames } from "../../src/adapters/provider/simulated/render-mp4.js";
import { probeMp4, probePng } from "../support/media-probe.js";

const MiB = 1024 * 1024;

function decode(bytes: Buffer): PNG {
  return PNG.sync.read(bytes);
}

/** The length of a PNG's image data once inflated: its IDAT chunks, concatenated. */
function zlibInflatedLength(png: Buffer): number {
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    if (png.toString("latin1", at + 4, at + 8) === "IDAT") idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  return inflateSync(Buffer.concat(idat)).length;
}

describe("renderPng", () => {
  for (const [width, height] of [
    [1024, 1024],
    [1344, 768],
    [768, 1344],
    [4096, 1024],
    [512, 4096],
    [3, 5],
    [1, 1],
  ] as const) {
    test(`is a decodable PNG of exactly ${width}x${height}`, () => {
      const bytes = renderPng({ width, height, seed: "a lighthouse at dawn" });
      assert.deepEqual(probePng(bytes), { width, height });
      const png = decode(bytes);
      assert.equal(png.width, width);
      assert.equal(png.height, height);
      assert.equal(png.data.length, width * height * 4);
    });
  }

  test("when a PNG is decoded, then its pixels are exactly the painted scene (every row's filter undone)", () => {
    for (const [width, height] of [[97, 61], [1024, 1024], [2, 1]] as const) {
      const painted = Buffer.alloc(width * height * 3);
      paintScene(sceneFromSeed("a lighthouse at dawn"), width, height, painted, 3);
      const { data } = decode(renderPng({ width, height, seed: "a lighthouse at dawn" }));
      for (let pixel = 0; pixel < width * height; pixel++) {
        const rgb = [data[pixel * 4], data[pixel * 4 + 1], data[pixel * 4 + 2]];
        const expected = [painted[pixel * 3], painted[pixel * 3 + 1], painted[pixel * 3 + 2]];
        if (rgb.some((v, i) => v !== expected[i])) assert.fail(`${width}x${height}: pixel ${pixel} is ${rgb}, painted ${expected}`);
      }
    }
  });

  test("when frames with as many pixels but other rows follow each other (16:9, 9:16, 1:1), then each PNG decodes whole", () => {
    for (const [width, height] of [[1024, 576], [576, 1024], [1024, 576], [768, 768], [576, 1024]] as const) {
      const bytes = renderPng({ width, height, seed: `${width}x${height}` });
      const fresh = decode(bytes);
      assert.equal(fresh.width, width);
      assert.equal(fresh.height, height);
      assert.equal(zlibInflatedLength(bytes), (width * 3 + 1) * height, `${width}x${height}: the image data is not one row per line`);
    }
  });

  test("when the same size is rendered again with another seed, then the first PNG's bytes stay as they were", () => {
    const first = renderPng({ width: 1024, height: 1024, seed: "first" });
    const copy = Buffer.from(first);
    const second = renderPng({ width: 1024, height: 1024, seed: "second" });
    assert.ok(first.equals(copy), "the first PNG changed when the next one was rendered");
    assert.ok(!first.equals(second));
    assert.ok(renderPng({ width: 1024, height: 1024, seed: "first" }).equals(copy));
  });

  test("the same seed gives identical bytes", () => {
    const a = renderPng({ width: 640, height: 480, seed: "same prompt" });
    const b = renderPng({ width: 640, height: 480, seed: "same prompt" });
    assert.ok(a.equals(b));
  });

  test("different seeds give visibly different pixels", () => {
    const a = decode(renderPng({ width: 512, height: 512, seed: "a red fox in the snow" })).data;
    const b = decode(renderPng({ width: 512, height: 512, seed: "a red fox in the snow!" })).data;
    let differing = 0;
    for (let i = 0; i < a.length; i += 4) {
      const delta = Math.abs(a[i]! - b[i]!) + Math.abs(a[i + 1]! - b[i + 1]!) + Math.abs(a[i + 2]! - b[i + 2]!);
      if (delta > 24) differing++;
    }
    // A one-character change must change the picture broadly, not in a corner.
    assert.ok(differing > (512 * 512) / 2, `only ${differing} pixels differ clearly`);
  });

  test("is not blank: many colours and a wide brightness range", () => {
    for (const seed of ["", "x", "city skyline at dusk", "🦊 émoji prompt"]) {
      const { data } = decode(renderPng({ width: 400, height: 300, seed }));
      const colours = new Set<number>();
      let min = 255;
      let max = 0;
      for (let i = 0; i < data.length; i += 4) {
        colours.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
        const luma = (data[i]! * 3 + data[i + 1]! * 6 + data[i + 2]!) / 10;
        min = Math.min(min, luma);
        max = Math.max(max, luma);
      }
      assert.ok(colours.size >= 100, `seed ${JSON.stringify(seed)}: only ${colours.size} colours`);
      assert.ok(max - min >= 40, `seed ${JSON.stringify(seed)}: brightness range ${max - min}`);
    }
  });

  test("4096x4096 keeps a modest file size", () => {
    const bytes = renderPng({ width: 4096, height: 4096, seed: "largest image the catalogue asks for" });
    assert.deepEqual(probePng(bytes), { width: 4096, height: 4096 });
    assert.ok(bytes.length < 4 * MiB, `${bytes.length} bytes`);
  });

  test("rejects impossible sizes", () => {
    for (const [width, height] of [[0, 10], [10, -1], [1.5, 10], [Number.NaN, 10], [10, 100_000]]) {
      assert.throws(() => renderPng({ width: width!, height: height!, seed: "x" }), RangeError);
    }
  });
});

describe("probePng", () => {
  test("rejects what is not a complete PNG", () => {
    const good = renderPng({ width: 32, height: 32, seed: "probe" });
    assert.throws(() => probePng(new Uint8Array()));
    assert.throws(() => probePng(Buffer.from("GIF89a not a png at all, but long enough to have a header")));
    assert.throws(() => probePng(good.subarray(0, good.length - 20)), /truncated/);
    const wrongFirstChunk = Buffer.from(good);
    wrongFirstChunk.write("IDAT", 12, "latin1");
    assert.throws(() => probePng(wrongFirstChunk), /IHDR/);
  });
});

describe("renderMp4", () => {
  const cases = [
    { width: 1280, height: 720, durationSeconds: 4 },
    { width: 720, height: 1280, durationSeconds: 4 },
    { width: 1920, height: 1080, durationSeconds: 8 },
    { width: 3840, height: 2160, durationSeconds: 8 },
  ];
  for (const { width, height, durationSeconds } of cases) {
    test(`is an H.264 MP4 of ${width}x${height}, ${durationSeconds} s`, async () => {
      const bytes = await renderMp4({ width, height, durationSeconds, seed: "a red fox in the snow" });
      const probe = await probeMp4(bytes);
      assert.equal(probe.width, width);
      assert.equal(probe.height, height);
      assert.match(probe.codec, /^avc1\./);
      assert.ok(Math.abs(probe.durationSeconds - durationSeconds) <= 1 / DEFAULT_FPS, `duration ${probe.durationSeconds}`);
      assert.equal(probe.frames, durationSeconds * DEFAULT_FPS);
      assert.ok(bytes.length < 2 * MiB, `${bytes.length} bytes`);
    });
  }

  test("honours framesPerSecond and rounds odd durations to whole frames", async () => {
    const probe = await probeMp4(await renderMp4({ width: 320, height: 240, durationSeconds: 1.3, seed: "fps", framesPerSecond: 10 }));
    assert.equal(probe.frames, 13);
    assert.ok(Math.abs(probe.durationSeconds - 1.3) <= 1 / 10);
    const short = await probeMp4(await renderMp4({ width: 320, height: 240, durationSeconds: 0.1, seed: "fps" }));
    assert.equal(short.frames, 1);
  });

  test("the same seed gives identical bytes, another seed different ones", async () => {
    const options = { width: 640, height: 360, durationSeconds: 2 };
    const a = await renderMp4({ ...options, seed: "same prompt" });
    const b = await renderMp4({ ...options, seed: "same prompt" });
    const c = await renderMp4({ ...options, seed: "other prompt" });
    assert.ok(a.equals(b));
    assert.ok(!a.equals(c));
  });

  test("frames are deterministic and change from one to the next", () => {
    const options = { width: 320, height: 180, seed: "moving band", frames: 6 };
    // The generator refills one buffer, hence the copies.
    const first = Array.from(yuvFrames(options), (f) => f.slice());
    const second = Array.from(yuvFrames(options), (f) => f.slice());
    assert.equal(first.length, 6);
    for (let i = 0; i < first.length; i++) {
      assert.equal(first[i]!.length, (320 * 180 * 3) / 2);
      assert.deepEqual(first[i], second[i]);
      if (i > 0) assert.notDeepEqual(first[i], first[i - 1], `frame ${i} equals frame ${i - 1}`);
    }
  });

  test("concurrent renders do not interfere", async () => {
    const [a, b] = await Promise.all([
      renderMp4({ width: 1280, height: 720, durationSeconds: 2, seed: "left" }),
      renderMp4({ width: 1080, height: 1920, durationSeconds: 3, seed: "right" }),
    ]);
    assert.deepEqual(
      { ...(await probeMp4(a)), codec: "" },
      { width: 1280, height: 720, durationSeconds: 2, frames: 4, codec: "" },
    );
    assert.deepEqual(
      { ...(await probeMp4(b)), codec: "" },
      { width: 1080, height: 1920, durationSeconds: 3, frames: 6, codec: "" },
    );
  });

  test("rejects unsupported parameters without breaking later renders", async () => {
    const base = { width: 640, height: 360, durationSeconds: 1, seed: "x" };
    await assert.rejects(renderMp4({ ...base, width: 641 }), RangeError);
    await assert.rejects(renderMp4({ ...base, width: MAX_VIDEO_SIDE + 2 }), RangeError);
    await assert.rejects(renderMp4({ ...base, durationSeconds: 0 }), RangeError);
    await assert.rejects(renderMp4({ ...base, durationSeconds: Number.POSITIVE_INFINITY }), RangeError);
    // 7 does not divide the muxer's 90 kHz timescale.
    await assert.rejects(renderMp4({ ...base, framesPerSecond: 7 }), RangeError);
    await assert.rejects(renderMp4({ ...base, framesPerSecond: 0 }), RangeError);
    const probe = await probeMp4(await renderMp4(base));
    assert.equal(probe.width, 640);
  });

  test("leaves no process-wide error listeners behind", async () => {
    const count = () => process.listenerCount("uncaughtException") + process.listenerCount("unhandledRejection");
    const before = count();
    await renderMp4({ width: 64, height: 64, durationSeconds: 1, seed: "listeners" });
    assert.equal(count(), before);
  });
});

describe("probeMp4", () => {
  test("rejects what is not an MP4 with a video track", async () => {
    const good = await renderMp4({ width: 64, height: 64, durationSeconds: 1, seed: "probe" });
    await assert.rejects(probeMp4(new Uint8Array()));
    await assert.rejects(probeMp4(renderPng({ width: 32, height: 32, seed: "png" })));
    // mp4v2 writes the moov box last, so a file cut in half has no track table.
    await assert.rejects(probeMp4(good.subarray(0, good.length >> 1)), /moov/);
  });
});
