import { invalid } from "../errors/domain-error.js";
import { DATA_URI, wellFormedBase64 } from "./inline-images.js";

/** A data-URI prefix is never longer than this; more characters without its comma mean plain base64. */
const MAX_PREFIX_CHARS = 256;
const NOT_BASE64 = /[^A-Za-z0-9+/_=-]/;
const WHITESPACE = /\s+/g;
const ONLY_PADDING = /^=+$/;

/**
 * Decodes one inline image as its text arrives in pieces, under the same
 * rules as `parseInlineImage` (plain base64 or a base64 data URI, whitespace
 * ignored, padding only completing the last quantum: `wellFormedBase64`), so
 * a large image is decoded on its way to storage and never held whole as text. `feed` returns the bytes decoded
 * so far; `finish` the rest, or refuses an image that was not base64.
 */
export class InlineImageDecoder {
  mimeType = "application/octet-stream";
  decodedBytes = 0;
  private head = "";
  private headDone = false;
  /** Base64 characters not yet decoded: the last quantum while it is incomplete (decoded at finish). */
  private carry = "";
  private sawPayload = false;
  /** Base64 characters seen, padding left out, and the '=' that followed them. */
  private dataChars = 0;
  private padding = 0;

  constructor(private readonly index: number) {}

  private refuse(): never {
    throw invalid("invalid_input_image", `input_images_base64[${this.index}] is not base64 or a base64 data URI`, {
      field: `input_images_base64[${this.index}]`,
    });
  }

  feed(text: string): Uint8Array {
    if (this.headDone) return this.decode(text);
    this.head += text;
    const prefix = DATA_URI.exec(this.head);
    if (prefix) {
      this.mimeType = prefix[1] ?? this.mimeType;
      return this.startPayload(this.head.slice(prefix[0].length));
    }
    // Until a comma or enough characters arrived, this may still become a data URI.
    if (!this.head.includes(",") && this.head.length < MAX_PREFIX_CHARS) return EMPTY;
    return this.startPayload(this.head);
  }

  finish(): Uint8Array {
    const last = this.headDone ? EMPTY : this.startPayload(this.head);
    if (!this.sawPayload || !wellFormedBase64(this.dataChars, this.padding)) this.refuse();
    const rest = this.carry;
    this.carry = "";
    const tail = rest ? this.bytesOf(rest) : EMPTY;
    return last.length && tail.length ? Buffer.concat([last, tail]) : last.length ? last : tail;
  }

  private startPayload(text: string): Uint8Array {
    this.headDone = true;
    this.head = "";
    return this.decode(text);
  }

  private decode(text: string): Uint8Array {
    const chars = text.replace(WHITESPACE, "");
    if (chars.length === 0) return EMPTY;
    if (NOT_BASE64.test(chars)) this.refuse();
    this.sawPayload = true;
    // Padding ends the payload: at most two '=' and nothing after them (whether it completes the quantum is judged at finish).
    const pad = this.padding > 0 ? 0 : chars.indexOf("=");
    let data = chars;
    if (pad >= 0) {
      const padding = chars.length - pad;
      if (this.padding + padding > 2 || !ONLY_PADDING.test(chars.slice(pad))) this.refuse();
      this.padding += padding;
      data = chars.slice(0, pad);
    }
    this.dataChars += data.length;
    const all = this.carry + data;
    const whole = all.length - (all.length % 4);
    this.carry = all.slice(whole);
    return whole ? this.bytesOf(all.slice(0, whole)) : EMPTY;
  }

  private bytesOf(base64: string): Uint8Array {
    const bytes = Buffer.from(base64, "base64");
    this.decodedBytes += bytes.length;
    return bytes;
  }
}

const EMPTY = new Uint8Array(0);
