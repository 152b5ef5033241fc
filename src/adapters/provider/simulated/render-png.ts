import { createHash } from "node:crypto";
import { deflateSync } from "node:zlib";

/**
 * Deterministic stand-in artwork for the simulated provider.
 *
 * The picture is a two-colour linear gradient with a handful of translucent
 * discs on top; colours, direction and disc layout come from a SHA-256 of the
 * seed (the prompt). Only +, -, *, / and Math.sqrt are used on floats — all
 * correctly rounded in IEEE 754 — so the pixels do not depend on the
 * platform's Math.sin/cos implementation. Byte-identical PNGs additionally
 * rely on the bundled zlib, which is fixed per Node build.
 */

export interface Rgb {
  r: number;
  g: number;
  b: number;
}

interface Disc {
  /** Centre and radius as fractions: x of width, y of height, radius of the short side. */
  fx: number;
  fy: number;
  fr: number;
  colour: Rgb;
}

export interface Scene {
  from: Rgb;
  to: Rgb;
  /** Gradient direction; not normalised, only its ratio matters. */
  dx: number;
  dy: number;
  discs: Disc[];
  /** Spare colour for animated overlays (the video's moving band). */
  accent: Rgb;
}

/** Caps a side well above anything the catalogue asks for, so a bad caller gets an error rather than an OOM. */
export const MAX_SIDE = 16384;

export function assertFrameSize(width: number, height: number): void {
  for (const [name, v] of [["width", width], ["height", height]] as const) {
    if (!Number.isInteger(v) || v < 1 || v > MAX_SIDE) {
      throw new RangeError(`${name} must be an integer in 1..${MAX_SIDE}, got ${v}`);
    }
  }
}

/** sfc32: tiny, integer-only PRNG, so the 32 bytes of the digest can be stretched deterministically. */
function sfc32(a: number, b: number, c: number, d: number): () => number {
  return () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    const t = (a + b + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
}

/** HSL with s, l in [0,1] and h in [0,6): piecewise-linear, so no trigonometry is needed. */
function hsl(h: number, s: number, l: number): Rgb {
  const c = (1 - Math.abs(2 * l - 1)) * s;
  const x = c * (1 - Math.abs((h % 2) - 1));
  const m = l - c / 2;
  const [r, g, b] =
    h < 1 ? [c, x, 0] : h < 2 ? [x, c, 0] : h < 3 ? [0, c, x] : h < 4 ? [0, x, c] : h < 5 ? [x, 0, c] : [c, 0, x];
  const to8 = (v: number) => Math.min(255, Math.max(0, Math.round((v + m) * 255)));
  return { r: to8(r), g: to8(g), b: to8(b) };
}

const luma = (c: Rgb) => (c.r * 299 + c.g * 587 + c.b * 114) / 1000;

function mix(a: Rgb, b: Rgb, t: number): Rgb {
  const at = (x: number, y: number) => Math.round(x + (y - x) * t);
  return { r: at(a.r, b.r), g: at(a.g, b.g), b: at(a.b, b.b) };
}

export function sceneFromSeed(seed: string): Scene {
  const digest = createHash("sha256").update(seed, "utf8").digest();
  const rand = sfc32(digest.readUInt32BE(0), digest.readUInt32BE(4), digest.readUInt32BE(8), digest.readUInt32BE(12));
  // Mix the rest of the digest in; sfc32 also needs a few rounds before its output is well spread.
  const rest = sfc32(digest.readUInt32BE(16), digest.readUInt32BE(20), digest.readUInt32BE(24), digest.readUInt32BE(28));
  for (let i = 0; i < 12; i++) rand(), rest();
  const next = () => (rand() + rest()) % 1;

  const hue = next() * 6;
  // Complementary-ish second hue keeps the gradient from looking flat.
  const hue2 = (hue + 1.5 + next() * 3) % 6;
  let from = hsl(hue, 0.55 + next() * 0.4, 0.25 + next() * 0.2);
  let to = hsl(hue2, 0.55 + next() * 0.4, 0.55 + next() * 0.2);
  // HSL lightness is not perceived brightness (dark yellow outshines light blue),
  // so push the ends apart until the gradient has real contrast.
  while (luma(to) - luma(from) < 80) {
    from = mix(from, { r: 0, g: 0, b: 0 }, 0.15);
    to = mix(to, { r: 255, g: 255, b: 255 }, 0.15);
  }
  let dx = next() * 2 - 1;
  const dy = next() * 2 - 1;
  if (Math.abs(dx) + Math.abs(dy) < 0.2) dx = dx < 0 ? -1 : 1;

  const discs: Disc[] = [];
  const count = 3 + Math.floor(next() * 5);
  for (let i = 0; i < count; i++) {
    discs.push({
      fx: next(),
      fy: next(),
      fr: 0.08 + next() * 0.3,
      colour: hsl((hue + next() * 6) % 6, 0.5 + next() * 0.5, 0.3 + next() * 0.5),
    });
  }
  const accent = hsl((hue2 + 3) % 6, 0.9, 0.85);
  return { from, to, dx, dy, discs, accent };
}

/**
 * Paints the scene into `out` (row-major, `channels` bytes per pixel; with 4
 * the alpha byte is set opaque). Discs are drawn as per-row spans so the cost
 * stays proportional to the covered area, which keeps 4096x4096 cheap.
 */
export function paintScene(scene: Scene, width: number, height: number, out: Uint8Array, channels: 3 | 4): void {
  if (out.length < width * height * channels) throw new RangeError("output buffer too small");
  const { from, to, dx, dy } = scene;
  const span = Math.abs(width * dx) + Math.abs(height * dy);
  const step = dx / span;
  const dr = to.r - from.r;
  const dg = to.g - from.g;
  const db = to.b - from.b;
  const rowBytes = width * channels;

  for (let y = 0; y < height; y++) {
    let t = 0.5 + (-(width / 2) * dx + (y - height / 2) * dy) / span;
    let o = y * rowBytes;
    for (let x = 0; x < width; x++, t += step, o += channels) {
      out[o] = from.r + dr * t + 0.5;
      out[o + 1] = from.g + dg * t + 0.5;
      out[o + 2] = from.b + db * t + 0.5;
      if (channels === 4) out[o + 3] = 255;
    }
  }

  const short = Math.min(width, height);
  for (const d of scene.discs) {
    const cx = d.fx * width;
    const cy = d.fy * height;
    const r = Math.max(1, d.fr * short);
    const { r: cr, g: cg, b: cb } = d.colour;
    const y0 = Math.max(0, Math.ceil(cy - r));
    const y1 = Math.min(height - 1, Math.floor(cy + r));
    for (let y = y0; y <= y1; y++) {
      const half = Math.sqrt(r * r - (y - cy) * (y - cy));
      const x0 = Math.max(0, Math.ceil(cx - half));
      const x1 = Math.min(width - 1, Math.floor(cx + half));
      for (let o = y * rowBytes + x0 * channels, end = y * rowBytes + x1 * channels; o <= end; o += channels) {
        // 50 % blend: overlapping discs stay distinguishable and the gradient shows through.
        out[o] = (out[o]! + cr) >> 1;
        out[o + 1] = (out[o + 1]! + cg) >> 1;
        out[o + 2] = (out[o + 2]! + cb) >> 1;
      }
    }
  }
}

export function renderPng(options: { width: number; height: number; seed: string }): Buffer {
  const { width, height, seed } = options;
  assertFrameSize(width, height);
  const frame = frameBuffers(width, height);
  paintScene(sceneFromSeed(seed), width, height, frame.pixels, 3);
  return encodeRgbPng(width, height, frame);
}

/**
 * A frame's pixels and their filtered rows. Kept for the next render of a frame up to 1K square: a render thread
 * then allocates only the compressed bytes, not two frames' worth of garbage per image (a 1K frame is 3 MiB, and a
 * busy thread renders dozens per second). Bigger frames are rare and get buffers of their own.
 */
interface FrameBuffers {
  readonly width: number;
  readonly height: number;
  readonly pixels: Buffer;
  readonly filtered: Buffer;
}

const KEPT_FRAME_BYTES = 1024 * 1024 * 3;
let kept: FrameBuffers | undefined;

function frameBuffers(width: number, height: number): FrameBuffers {
  // The same size, not only as many pixels: 16:9 and 9:16 have as many, but not as many rows (one filter byte each).
  if (kept?.width === width && kept.height === height) return kept;
  const bytes = width * height * 3;
  const frame = { width, height, pixels: Buffer.allocUnsafeSlow(bytes), filtered: Buffer.allocUnsafeSlow(bytes + height) };
  if (bytes <= KEPT_FRAME_BYTES) kept = frame;
  return frame;
}

/**
 * An 8-bit RGB PNG (colour type 2): each row filtered with "Sub" (the smooth gradient becomes runs of tiny deltas;
 * trying all five filters per row costs about 3x the time for little gain here), one IDAT compressed at level 1
 * with zlib's run-length strategy, as pngjs wrote it before (the same bytes), without its per-image frame copies.
 */
function encodeRgbPng(width: number, height: number, { pixels, filtered }: FrameBuffers): Buffer {
  const rowBytes = width * 3;
  for (let y = 0; y < height; y++) {
    const from = y * rowBytes;
    const to = y * (rowBytes + 1);
    filtered[to] = 1; // Sub
    for (let x = 0; x < rowBytes; x++) filtered[to + 1 + x] = pixels[from + x]! - (x >= 3 ? pixels[from + x - 3]! : 0);
  }
  const idat = deflateSync(filtered, { level: 1, strategy: 3 /* Z_RLE */, chunkSize: 128 * 1024 });
  const png = Buffer.allocUnsafeSlow(PNG_SIGNATURE.length + (12 + 13) + (12 + idat.length) + 12);
  png.set(PNG_SIGNATURE);
  let at = writeChunk(png, PNG_SIGNATURE.length, "IHDR", 13, (data) => {
    png.writeUInt32BE(width, data);
    png.writeUInt32BE(height, data + 4);
    png.set([8, 2, 0, 0, 0], data + 8); // bit depth 8, RGB, deflate, adaptive filtering, no interlace
  });
  at = writeChunk(png, at, "IDAT", idat.length, (data) => idat.copy(png, data));
  writeChunk(png, at, "IEND", 0, () => {});
  return png;
}

const PNG_SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);

/** Writes a chunk (length, type, data, CRC of type and data) at `at`; returns where the next one starts. */
function writeChunk(png: Buffer, at: number, type: string, length: number, writeData: (dataAt: number) => void): number {
  png.writeUInt32BE(length, at);
  png.write(type, at + 4, "latin1");
  writeData(at + 8);
  png.writeUInt32BE(crc32(png, at + 4, at + 8 + length), at + 8 + length);
  return at + 12 + length;
}

const CRC_TABLE = Int32Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c;
});

/** CRC-32 (ISO 3309), as PNG chunks carry it. */
function crc32(bytes: Uint8Array, start: number, end: number): number {
  let c = -1;
  for (let i = start; i < end; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}
