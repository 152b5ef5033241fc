/** Smallest headers of each image format the domain reads dimensions from (test data, not images). */

const u16be = (n: number) => [(n >> 8) & 0xff, n & 0xff];
const u16le = (n: number) => [n & 0xff, (n >> 8) & 0xff];
const u24le = (n: number) => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff];
const u32be = (n: number) => [(n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
const i32le = (n: number) => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, (n >> 24) & 0xff];
const ascii = (text: string) => [...text].map((c) => c.charCodeAt(0));

/** Signature, IHDR length and type, width, height: 24 bytes. */
export const png = (width: number, height: number) =>
  Uint8Array.from([0x89, ...ascii("PNG\r\n\x1a\n"), 0, 0, 0, 13, ...ascii("IHDR"), ...u32be(width), ...u32be(height)]);

export const gif = (width: number, height: number, version = "GIF89a") => Uint8Array.from([...ascii(version), ...u16le(width), ...u16le(height)]);

/** File header, then the info header's size, width and height (height negative for top-down rows): 26 bytes. */
export const bmp = (width: number, height: number) =>
  Uint8Array.from([...ascii("BM"), ...new Array(12).fill(0), 40, 0, 0, 0, ...i32le(width), ...i32le(height)]);

const riff = (chunk: string, body: number[]) => Uint8Array.from([...ascii("RIFF"), 0, 0, 0, 0, ...ascii("WEBP"), ...ascii(chunk), ...body]);

/** Lossy: frame tag and start code (bytes 20–25), then 14-bit width and height with 2 scale bits each: 30 bytes. */
export const webpLossy = (width: number, height: number, scaleBits = 0) =>
  riff("VP8 ", [0, 0, 0, 0, 0, 0, 0, 0x9d, 0x01, 0x2a, ...u16le(width | (scaleBits << 14)), ...u16le(height | (scaleBits << 14))]);

/** Lossless: signature 0x2f, then width − 1 and height − 1 in 14 bits each (bytes 21–24): 30 bytes. */
export const webpLossless = (width: number, height: number) => {
  const bits = (width - 1) | ((height - 1) << 14);
  return riff("VP8L", [0, 0, 0, 0, 0x2f, bits & 0xff, (bits >> 8) & 0xff, (bits >> 16) & 0xff, (bits >>> 24) & 0xff, 0, 0, 0, 0, 0]);
};

/** Extended: flags, then width − 1 and height − 1 in 24 bits each (bytes 24–29): 30 bytes. */
export const webpExtended = (width: number, height: number) => riff("VP8X", [0, 0, 0, 0, 0, 0, 0, 0, ...u24le(width - 1), ...u24le(height - 1)]);

/** A JPEG segment with a length: marker, length (counting itself), body. */
export const segment = (marker: number, body: number[]) => [0xff, marker, ...u16be(body.length + 2), ...body];

/** Start of frame: precision, height, width, then one component; one trailing byte as a real file has. */
export const frame = (marker: number, width: number, height: number) => [...segment(marker, [8, ...u16be(height), ...u16be(width), 1, 1, 0x11, 0]), 0];

export const jpeg = (...parts: number[][]) => Uint8Array.from([0xff, 0xd8, ...parts.flat()]);
