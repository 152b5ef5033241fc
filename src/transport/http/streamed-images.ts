import type { FastifyInstance, FastifyRequest } from "fastify";
import { createContextValues, type ContextValues } from "@connectrpc/connect";
import { type ImageUpload, type InlineStaging, STAGED_IMAGES, type StagedInlineImage, type StagingSession, type ValidationLimits } from "../../core/index.js";
import { bodyTooLarge, sizeText } from "./error-replies.js";
import { GatewayError } from "./gateway-error.js";
import { longestPromptBytes } from "../admission.js";

/** The top-level field whose strings are images, by its proto and its JSON name: the mapping accepts both. */
const IMAGE_FIELD_NAMES: ReadonlySet<string> = new Set(["input_images_base64", "inputImagesBase64"]);
/** Raw bytes of a key that may still decode to one of those names: every character escaped (`\u0069`). */
const MAX_KEY_RAW_BYTES = 6 * Math.max(...[...IMAGE_FIELD_NAMES].map((name) => name.length));
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
/** JSON's insignificant whitespace. */
const isSpace = (byte: number) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
/** Control characters, which JSON allows in a string only escaped. */
const CONTROL = /[\u0000-\u001f]/;
/** Where the escape that begins at `at` in `raw` ends: `\uXXXX` or two characters. */
const escapeEnd = (raw: string, at: number) => at + (raw[at + 1] === "u" ? 6 : 2);
/** Past this many bytes without a backslash, the search for the next one is left to `indexOf` again. */
const DENSE_ESCAPES = 64;

/** A streamed body's budget besides its images: prompt and metadata escaped at worst (6 bytes a byte) plus MAX_BODY_BYTES. */
export function otherFieldsBytes(limits: Pick<ValidationLimits, "maxPromptBytes" | "metadata">, maxBodyBytes: number): number {
  return 6 * (longestPromptBytes(limits) + limits.metadata.maxTotalBytes) + maxBodyBytes;
}

const invalidJson = (why: string) => new GatewayError(400, "invalid_json", `the body is not valid JSON: ${why}`);

/** The image field named twice: JSON would keep one of them silently (and the proto mapping refuses both names at once). */
const namedTwice = (first: string, second: string) => new GatewayError(
  422, "validation_failed",
  first === second
    ? `invalid field: ${first} appears more than once in the body`
    : `invalid field: input_images_base64 appears more than once in the body (as ${first} and ${second})`,
);

/** The inside of a JSON string as JSON.parse reads it, or undefined where JSON refuses it. */
function unescaped(raw: string): string | undefined {
  if (!raw.includes("\\") && !CONTROL.test(raw)) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return undefined;
  }
}

/** Follows a JSON body as it arrives, in linear time: with a session, image strings go to it and the rest is kept; else it finds keys. */
class BodyScanner {
  readonly images: StagedInlineImage[] = [];
  readonly imageFields: string[] = [];
  private readonly rest: Buffer[] = [];
  private restBytes = 0;
  private received = 0;
  private depth = 0;
  private topIsObject = false;
  /** In the top-level object, where a key comes next. */
  private expectKey = false;
  /** After the image field's name, until its value opens. */
  private expectImages = false;
  private inImages = false;
  private inString = false;
  /** The last chunk ended right after a backslash, in a string other than an image (whose escape is in `tail`). */
  private escaped = false;
  /** The raw text of the top-level key being read, while it may still be the image field's name. */
  private keyRaw: string | undefined;
  /** The last top-level key, when it named the image field. */
  private key: string | undefined;
  /** The image string being read, and its escape cut by a chunk's end (e.g. `\u00`), completed by the next. */
  private upload: ImageUpload | undefined;
  private tail = "";
  /** In the current chunk: the next quote and backslash `indexOf` found, reused until passed; where the last escape began. */
  private quote = -1;
  private slash = -1;
  private lastEscape = -1;

  constructor(
    private readonly limits: { readonly maxBytes: number; readonly maxOtherBytes: number },
    private readonly session?: StagingSession,
  ) {}

  private keep(bytes: Buffer): void {
    if (!this.session || bytes.length === 0) return;
    this.restBytes += bytes.length;
    if (this.restBytes > this.limits.maxOtherBytes) {
      throw new GatewayError(422, "input_too_large", `the request's fields besides input_images_base64 are larger than ${sizeText(this.limits.maxOtherBytes)}`);
    }
    // A copy: a chunk that is mostly image is not held for the few bytes of structure it also carries.
    this.rest.push(Buffer.from(bytes));
  }

  /** Takes one more chunk; resolves once what it carried of images was handed on (backpressure). */
  async push(chunk: Buffer): Promise<void> {
    this.received += chunk.length;
    if (this.received > this.limits.maxBytes) throw bodyTooLarge(this.limits.maxBytes);
    const n = chunk.length;
    this.quote = chunk.indexOf(QUOTE);
    this.slash = chunk.indexOf(BACKSLASH);
    let from = 0; // start of what is still to be kept of this chunk
    let i = 0;
    while (i < n) {
      if (this.inString) {
        // An image's escape cut by the last chunk's end takes its remaining bytes first, whatever they are (JSON.parse judges).
        while (this.upload && this.tail && i < n && this.tail.length < escapeEnd(this.tail, 0)) this.tail += String.fromCharCode(chunk[i++]!);
        const close = this.stringEnd(chunk, this.escaped ? i + 1 : i);
        const end = close < 0 ? n : close;
        this.escaped = !this.upload && close < 0 && this.lastEscape === n - 1;
        if (this.upload) await this.feed(chunk, i, end, close < 0);
        else if (this.keyRaw !== undefined) {
          this.keyRaw += chunk.toString("latin1", i, Math.min(end, i + MAX_KEY_RAW_BYTES + 1));
          if (this.keyRaw.length > MAX_KEY_RAW_BYTES) this.keyRaw = undefined;
        }
        if (close < 0) break;
        i = close + 1;
        this.inString = false;
        if (this.upload) {
          this.images.push(await this.upload.finish());
          this.upload = undefined;
          from = close;
        } else if (this.keyRaw !== undefined) {
          const name = unescaped(this.keyRaw);
          if (name !== undefined && IMAGE_FIELD_NAMES.has(name)) this.key = name;
          this.keyRaw = undefined;
        }
        continue;
      }
      const byte = chunk[i]!;
      if (this.expectImages && byte !== OPEN_ARRAY && !isSpace(byte)) this.expectImages = false;
      if (byte === QUOTE) {
        this.inString = true;
        if (this.inImages && this.depth === 2 && this.session) {
          // An image string opens: its text goes to staging, its quotes stay (`""`: the array keeps its positions and types).
          this.keep(chunk.subarray(from, i + 1));
          this.upload = this.session.open();
        } else if (this.depth === 1 && this.expectKey) {
          this.expectKey = false;
          this.key = undefined;
          this.keyRaw = "";
        }
      } else if (byte === COLON && this.depth === 1 && this.key !== undefined) {
        const first = this.imageFields[0];
        if (first !== undefined) throw namedTwice(first, this.key);
        this.imageFields.push(this.key);
        this.expectImages = true;
        this.key = undefined;
      } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
        this.depth++;
        if (this.depth === 1) this.expectKey = this.topIsObject = byte === OPEN_OBJECT;
        this.inImages ||= this.expectImages;
        this.expectImages = false;
      } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
        if (this.depth === 2) this.inImages = false;
        this.depth--;
      } else if (byte === COMMA && this.depth === 1) {
        this.expectKey = this.topIsObject;
      }
      i++;
    }
    if (!this.upload) this.keep(chunk.subarray(from));
  }

  /** From `at` inside a string, not in an escape: its closing quote's index, or -1 past the chunk; `\u`'s digits are plain bytes here. */
  private stringEnd(chunk: Buffer, at: number): number {
    this.lastEscape = -1;
    let plain = DENSE_ESCAPES; // bytes since the last backslash: a stretch dense in escapes is walked byte by byte once
    for (let k = at; k < chunk.length;) {
      if (plain >= DENSE_ESCAPES) {
        if (this.quote >= 0 && this.quote < k) this.quote = chunk.indexOf(QUOTE, k);
        if (this.slash >= 0 && this.slash < k) this.slash = chunk.indexOf(BACKSLASH, k);
        if (this.slash < 0 || (this.quote >= 0 && this.quote < this.slash)) return this.quote;
        k = this.slash;
        plain = 0;
      }
      const byte = chunk[k];
      if (byte === BACKSLASH) {
        this.lastEscape = k;
        k += 2;
        plain = 0;
      } else if (byte === QUOTE) {
        return k;
      } else {
        k++;
        plain++;
      }
    }
    return -1;
  }

  /** Hands this chunk's run of the image to staging, unescaped as the whole-body path would; an escape cut in two waits. */
  private async feed(chunk: Buffer, start: number, end: number, open: boolean): Promise<void> {
    const raw = this.tail + chunk.toString("latin1", start, end);
    // The last escape begun (in this chunk, else the one carried over) waits for the next chunk unless complete.
    const last = this.lastEscape >= 0 ? raw.length - (end - this.lastEscape) : this.tail ? 0 : -1;
    const cut = open && last >= 0 && escapeEnd(raw, last) > raw.length ? last : raw.length;
    this.tail = raw.slice(cut);
    const text = unescaped(raw.slice(0, cut));
    if (text === undefined) {
      throw invalidJson(`input_images_base64[${this.images.length}] holds an invalid escape or an unescaped control character`);
    }
    if (text) await this.upload!.feed(text);
  }

  /** The body has ended: its text with `""` for each image, the images staged, the keys that named the image field (one at most). */
  finish() {
    if (this.upload) throw invalidJson("it ends inside a string");
    return { rest: Buffer.concat(this.rest), images: this.images, imageFields: this.imageFields };
  }
}

/** Reads a large JSON body without holding it: images go piece by piece to staging, the rest is kept (`""` for each). For tests too. */
export async function scanStreamedBody(
  chunks: AsyncIterable<Buffer>, session: StagingSession, limits: { maxBytes: number; maxOtherBytes: number },
): Promise<ReturnType<BodyScanner["finish"]>> {
  const scanner = new BodyScanner(limits, session);
  for await (const chunk of chunks) await scanner.push(chunk);
  return scanner.finish();
}

const staged = new WeakMap<FastifyRequest, { session: StagingSession; images: StagedInlineImage[] }>();

/** Removes what this request staged and no job took, before the answer leaves (and again when the request ends). */
export async function discardStaged(request: FastifyRequest): Promise<void> {
  await staged.get(request)?.session.discard();
}

/** The call's context values: the images staged while this request's body arrived (none for a body parsed whole). */
export function stagedImagesOf(request: FastifyRequest): ContextValues | undefined {
  const entry = staged.get(request);
  return entry ? createContextValues().set(STAGED_IMAGES, entry.images) : undefined;
}

/** The body's chunks, without destroying the request when reading stops early (a refusal): the answer must still reach the client. */
const keepOpen = (payload: FastifyRequest["raw"]) => payload.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>;

/** A body read whole, up to `limit` bytes (Content-Length was checked before; a chunked body is counted). */
async function readWhole(payload: AsyncIterable<Buffer>, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of payload) {
    size += chunk.length;
    if (size > limit) throw bodyTooLarge(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export interface StreamedImagesOptions {
  /** The core's staging, when it runs in this process (read per request: the core opens after the gateway listens). */
  readonly staging: () => InlineStaging | undefined;
  /** Bodies announcing more than this (or no length) are streamed. */
  readonly streamAbove: number;
  /** MAX_BODY_BYTES, from which a streamed body's `otherFieldsBytes` derive. */
  readonly maxOtherBytes: number;
}

/** A JSON parser streaming large bodies' images to an in-process core's staging; both paths refuse the image field named twice. */
export function streamInlineImages(app: FastifyInstance, options: StreamedImagesOptions): void {
  const plain = app.getDefaultJsonParser("error", "error");
  const parse = (request: FastifyRequest, text: string) =>
    new Promise<unknown>((resolve, reject) => plain(request, text, (error, body) => (error ? reject(error) : resolve(body))));
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", async (request: FastifyRequest, payload: FastifyRequest["raw"]) => {
    const limit = request.routeOptions.bodyLimit ?? options.maxOtherBytes;
    // An announced length over `limit` was refused before the body (bodyGuard, on every route of this plugin).
    const length = Number(request.headers["content-length"] ?? NaN);
    const staging = options.staging();
    if (!staging || (Number.isFinite(length) && length <= options.streamAbove)) {
      const bytes = await readWhole(keepOpen(payload), limit);
      const body = await parse(request, bytes.toString("utf8"));
      // JSON keeps the last of two equal keys: the streamed path cannot, so neither path takes them.
      if ([...IMAGE_FIELD_NAMES].some((name) => Object.hasOwn(Object(body), name))) {
        await new BodyScanner({ maxBytes: Infinity, maxOtherBytes: 0 }).push(bytes);
      }
      return body;
    }
    const session = staging.session();
    staged.set(request, { session, images: [] });
    const maxOtherBytes = otherFieldsBytes(staging.limits, options.maxOtherBytes);
    const scanned = await scanStreamedBody(keepOpen(payload), session, { maxBytes: limit, maxOtherBytes });
    const body = await parse(request, scanned.rest.toString("utf8"));
    // The field's strings were staged: it goes, unless it holds something else, which the mapping then refuses as it would whole.
    for (const name of scanned.imageFields) {
      const field = (body as Record<string, unknown>)[name];
      if (Array.isArray(field) && field.every((value) => value === "")) delete (body as Record<string, unknown>)[name];
    }
    staged.set(request, { session, images: scanned.images });
    return body;
  });
  // Refused while arriving or after parsing (a schema, a rule): what the body staged goes before the error answer leaves.
  app.addHook("onError", async (request) => discardStaged(request));
  app.addHook("onResponse", discardStaged);
  app.addHook("onRequestAbort", discardStaged);
}
