import { createRequire } from "node:module";
import type { H264MP4Encoder } from "h264-mp4-encoder";
import { assertFrameSize, paintScene, sceneFromSeed } from "./render-png.js";

/**
 * Deterministic stand-in video for the simulated provider: the seed's still
 * (see render-png) with a translucent band sweeping across it, encoded as
 * H.264 Baseline in MP4 by h264-mp4-encoder (minih264 + mp4v2 compiled to WASM).
 *
 * Frame sizes that are not multiples of 16 (1080) are fine: the encoder pads
 * to whole macroblocks and writes SPS cropping, so decoders show the exact size.
 */

interface EncoderModule {
  createH264MP4Encoder(): Promise<H264MP4Encoder>;
}

export interface RenderMp4Options {
  width: number;
  height: number;
  durationSeconds: number;
  seed: string;
  framesPerSecond?: number;
}

export const DEFAULT_FPS = 2;
const MAX_FPS = 60;
/**
 * minih264 trips an internal motion-vector assertion (and aborts the runtime)
 * from roughly 8000 px on a side; 4096 covers every catalogue size with margin.
 */
export const MAX_VIDEO_SIDE = 4096;
/** The library's fixed MP4 timescale. */
const TIMESCALE = 90000;

let encoderModule: Promise<EncoderModule> | undefined;
let outputCounter = 0;

/**
 * The Emscripten glue registers process-wide `uncaughtException` (rethrow) and
 * `unhandledRejection` (abort the WASM runtime for good, then throw) listeners
 * when it is loaded. Left in place, any stray rejection anywhere in the service
 * would permanently break video encoding, and the listeners would pin the
 * module's heap, so they are removed right after loading.
 *
 * It is loaded with `require` rather than `import` so that a broken runtime can
 * be dropped from the cache and a fresh instance (with a fresh heap) loaded.
 */
function loadEncoderModule(): Promise<EncoderModule> {
  encoderModule ??= (async () => {
    const require = createRequire(import.meta.url);
    const resolved = require.resolve("h264-mp4-encoder");
    delete require.cache[resolved];
    // Typed as a plain emitter: `process`'s per-event overloads do not accept a union of event names.
    const emitter: NodeJS.EventEmitter = process;
    const events = ["uncaughtException", "unhandledRejection"];
    const before = events.map((e) => new Set(emitter.listeners(e)));
    try {
      return require(resolved) as EncoderModule;
    } finally {
      events.forEach((event, i) => {
        for (const listener of emitter.listeners(event)) {
          if (!before[i]!.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
        }
      });
    }
  })();
  return encoderModule;
}

function discardEncoderModule(module: Promise<EncoderModule>): void {
  // Only drop it if a concurrent failure has not already replaced it.
  if (encoderModule === module) encoderModule = undefined;
}

/** Lets other requests run between frames: a 4K encode would otherwise hold the event loop for seconds. */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function validate(options: RenderMp4Options): { fps: number; frames: number } {
  const { width, height, durationSeconds } = options;
  assertFrameSize(width, height);
  // 4:2:0 chroma makes odd sizes unrepresentable; the encoder would otherwise abort its runtime.
  if (width % 2 !== 0 || height % 2 !== 0) {
    throw new RangeError(`video frame size must be even, got ${width}x${height}`);
  }
  if (width > MAX_VIDEO_SIDE || height > MAX_VIDEO_SIDE) {
    throw new RangeError(`video frame sides must be at most ${MAX_VIDEO_SIDE}, got ${width}x${height}`);
  }
  const fps = options.framesPerSecond ?? DEFAULT_FPS;
  // The muxer stamps every frame with the integer 90000 / fps ticks, so other rates would drift.
  if (!Number.isInteger(fps) || fps < 1 || fps > MAX_FPS || TIMESCALE % fps !== 0) {
    throw new RangeError(`framesPerSecond must be an integer in 1..${MAX_FPS} dividing ${TIMESCALE}, got ${fps}`);
  }
  if (!Number.isFinite(durationSeconds) || durationSeconds <= 0) {
    throw new RangeError(`durationSeconds must be positive, got ${durationSeconds}`);
  }
  // Rounded, so the duration is exact whenever duration × fps is whole and within half a frame otherwise.
  const frames = Math.max(1, Math.round(durationSeconds * fps));
  return { fps, frames };
}

interface Yuv {
  y: number;
  u: number;
  v: number;
}

/** BT.601 limited range, the same matrix the library's own RGBA path uses. */
function rgbToYuv(r: number, g: number, b: number): Yuv {
  return {
    y: ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16,
    u: ((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128,
    v: ((112 * r - 94 * g - 18 * b + 128) >> 8) + 128,
  };
}

/**
 * Planar I420 from packed RGB, chroma averaged over each 2x2 block. Converting
 * once per video and handing the encoder YUV frames cut a 4K encode by about a
 * quarter: addFrameRgba converts every frame inside WASM and copies 4 bytes per
 * pixel into its heap instead of 1.5.
 */
function rgbToI420(rgb: Uint8Array, width: number, height: number): Uint8Array {
  const out = new Uint8Array((width * height * 3) / 2);
  const uBase = width * height;
  const vBase = uBase + uBase / 4;
  const half = width / 2;
  for (let y = 0; y < height; y++) {
    for (let x = 0, i = y * width * 3, o = y * width; x < width; x++, i += 3, o++) {
      out[o] = ((66 * rgb[i]! + 129 * rgb[i + 1]! + 25 * rgb[i + 2]! + 128) >> 8) + 16;
    }
  }
  for (let cy = 0; cy < height / 2; cy++) {
    const top = 2 * cy * width * 3;
    const bottom = top + width * 3;
    for (let cx = 0; cx < half; cx++) {
      const a = top + cx * 6;
      const b = bottom + cx * 6;
      const r = (rgb[a]! + rgb[a + 3]! + rgb[b]! + rgb[b + 3]! + 2) >> 2;
      const g = (rgb[a + 1]! + rgb[a + 4]! + rgb[b + 1]! + rgb[b + 4]! + 2) >> 2;
      const bl = (rgb[a + 2]! + rgb[a + 5]! + rgb[b + 2]! + rgb[b + 5]! + 2) >> 2;
      const c = cy * half + cx;
      out[uBase + c] = ((-38 * r - 74 * g + 112 * bl + 128) >> 8) + 128;
      out[vBase + c] = ((112 * r - 94 * g - 18 * bl + 128) >> 8) + 128;
    }
  }
  return out;
}

/**
 * Blends a band into an I420 frame at `progress` ∈ (0,1) of its sweep: vertical,
 * moving left to right (horizontal, top to bottom, for portrait frames). The
 * conversion is affine, so blending in YUV matches blending in RGB; band edges
 * are kept even so the luma and chroma planes cover the same pixels.
 */
function drawBand(frame: Uint8Array, width: number, height: number, progress: number, colour: Yuv): void {
  const portrait = height > width;
  const along = portrait ? height : width;
  const thickness = Math.max(2, 2 * Math.round(along / 12));
  const start = 2 * Math.round((progress * (along + thickness) - thickness) / 2);
  const from = Math.max(0, start);
  const to = Math.min(along, start + thickness);
  if (to <= from) return;
  const [x0, x1, y0, y1] = portrait ? [0, width, from, to] : [from, to, 0, height];

  for (let y = y0; y < y1; y++) {
    for (let o = y * width + x0, end = y * width + x1; o < end; o++) frame[o] = (frame[o]! + colour.y) >> 1;
  }
  const half = width / 2;
  const uBase = width * height;
  const vBase = uBase + uBase / 4;
  for (let cy = y0 / 2; cy < y1 / 2; cy++) {
    for (let c = cy * half + x0 / 2, end = cy * half + x1 / 2; c < end; c++) {
      frame[uBase + c] = (frame[uBase + c]! + colour.u) >> 1;
      frame[vBase + c] = (frame[vBase + c]! + colour.v) >> 1;
    }
  }
}

/**
 * The video's frames as planar I420. The same buffer is refilled on every
 * step, so a consumer that keeps frames must copy them.
 */
export function* yuvFrames(options: { width: number; height: number; seed: string; frames: number }): Generator<Uint8Array> {
  const { width, height, seed, frames } = options;
  assertFrameSize(width, height);
  if (width % 2 !== 0 || height % 2 !== 0) throw new RangeError(`I420 needs even sizes, got ${width}x${height}`);
  const scene = sceneFromSeed(seed);
  const rgb = new Uint8Array(width * height * 3);
  paintScene(scene, width, height, rgb, 3);
  const background = rgbToI420(rgb, width, height);
  const accent = rgbToYuv(scene.accent.r, scene.accent.g, scene.accent.b);
  const frame = new Uint8Array(background.length);
  for (let i = 0; i < frames; i++) {
    frame.set(background);
    // Centred sampling keeps the band at least partly in view in every frame, including a 1-frame video.
    drawBand(frame, width, height, (i + 0.5) / frames, accent);
    yield frame;
  }
}

/**
 * mp4v2 stamps the wall-clock time into mvhd, tkhd and mdhd, which would make
 * every render of the same seed differ in a few bytes; zeroing them ("unknown"
 * in ISO BMFF) makes the output a pure function of the inputs, good for ETags
 * and caching.
 */
function zeroMp4Timestamps(mp4: Buffer): Buffer {
  const walk = (start: number, end: number) => {
    for (let off = start; off + 8 <= end; ) {
      const size = mp4.readUInt32BE(off);
      const type = mp4.toString("latin1", off + 4, off + 8);
      // size 0 (to end of file) and 1 (64-bit) are never written by mp4v2 for these small boxes; stop rather than guess.
      if (size < 8 || off + size > end) return;
      if (type === "moov" || type === "trak" || type === "mdia") walk(off + 8, off + size);
      if (type === "mvhd" || type === "tkhd" || type === "mdhd") {
        const wide = mp4[off + 8] === 1;
        mp4.fill(0, off + 12, off + 12 + (wide ? 16 : 8));
      }
      off += size;
    }
  };
  walk(0, mp4.length);
  return mp4;
}

export async function renderMp4(options: RenderMp4Options): Promise<Buffer> {
  const { width, height, seed } = options;
  const { fps, frames } = validate(options);

  const module = loadEncoderModule();
  let encoder: H264MP4Encoder;
  try {
    encoder = await (await module).createH264MP4Encoder();
  } catch (error) {
    discardEncoderModule(module);
    throw error;
  }

  // The Emscripten file system is shared by every encoder, so each call needs its own file name.
  const outputFilename = `render-${process.pid}-${++outputCounter}.mp4`;
  let failed = true;
  let initialized = false;
  let finalized = false;
  try {
    encoder.width = width;
    encoder.height = height;
    encoder.frameRate = fps;
    encoder.speed = 10;
    encoder.quantizationParameter = 30;
    // All-intra. The library flags every sample as a sync sample (it writes no
    // stss), so with P-frames a player seeking to one would decode garbage
    // until the next key frame; at 2 fps this costs ~3x in size (still < 1 MB
    // for 8 s of 4K) and nothing in speed.
    encoder.groupOfPictures = 1;
    encoder.outputFilename = outputFilename;
    encoder.initialize();
    initialized = true;

    for (const frame of yuvFrames({ width, height, seed, frames })) {
      encoder.addFrameYuv(frame);
      await yieldToEventLoop();
    }
    finalized = true;
    encoder.finalize();
    // Copy out: the file's bytes live in the WASM module's memory file system.
    const bytes = zeroMp4Timestamps(Buffer.from(encoder.FS.readFile(outputFilename)));
    failed = false;
    return bytes;
  } finally {
    // The C++ destructor calls abort() — killing the shared runtime — when
    // finalize() was skipped, so an aborted encode must still be finalized.
    if (initialized && !finalized) {
      try {
        encoder.finalize();
      } catch {
        failed = true;
      }
    }
    // Unlinking matters: files in the in-memory FS otherwise accumulate for the life of the process.
    try {
      encoder.FS.unlink(outputFilename);
    } catch {
      // Not created if initialize() failed.
    }
    try {
      encoder.delete();
    } catch {
      failed = true;
    }
    // After an abort (e.g. the 2 GiB heap exhausted) the runtime refuses every later call.
    if (failed) discardEncoderModule(module);
  }
}
