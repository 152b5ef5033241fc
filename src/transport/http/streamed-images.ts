import type { FastifyInstance, FastifyRequest } from "fastify";
import { createContextValues, type ContextValues } from "@connectrpc/connect";
import { type ImageUpload, type InlineStaging, STAGED_IMAGES, type StagedInlineImage, type StagingSession, type ValidationLimits } from "../../core/index.js";
import { bodyTooLarge, sizeText } from "./error-replies.js";
import { GatewayError } from "./gateway-error.js";

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
/** Stands in for a streamed image in the rest of the body: a string, so that the array keeps its positions and types. */
const PLACEHOLDER = Buffer.from('""');

/**
 * What a streamed body may take besides its images: the largest prompt and the metadata escaped at worst (6 characters
 * a byte) plus MAX_BODY_BYTES, the generation body limit's budget without images, so the two paths agree.
 */
export function otherFieldsBytes(limits: Pick<ValidationLimits, "maxPromptBytes" | "metadata">, maxBodyBytes: number): number {
  const prompt = Math.max(limits.maxPromptBytes.image, limits.maxPromptBytes.video, limits.maxPromptBytes.text);
  return 6 * (prompt + limits.metadata.maxTotalBytes) + maxBodyBytes;
}

const invalidJson = (why: string) => new GatewayError(400, "invalid_json", `the body is not valid JSON: ${why}`);

/** The image field named twice: JSON would keep one of them silently (and the proto mapping refuses both names at once). */
const namedTwice = (first: string, second: string) => new GatewayError(
  422, "validation_failed",
  first === second
    ? `invalid field: ${first} appears more than once in the body`
    : `invalid field: input_images_base64 appears more than once in the body (as ${first} and ${second})`,
);

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

/** Past this many bytes without a backslash, the search for the next one is left to `indexOf` again. */
const DENSE_ESCAPES = 64;

/**
 * Finds where strings end in one chunk in linear time: the next quote and backslash found with `indexOf` are reused
 * until passed (never searched again from every escape); a stretch dense in escapes is walked byte by byte once.
 */
class ChunkSearch {
  private quote = -2;
  private slash = -2;
  /** Where the last escape seen by `stringEnd` began (its backslash), or -1. */
  lastEscape = -1;

  constructor(private readonly chunk: Buffer) {}

  private nextQuote(at: number): number {
    if (this.quote === -2 || (this.quote >= 0 && this.quote < at)) this.quote = this.chunk.indexOf(QUOTE, at);
    return this.quote;
  }

  private nextSlash(at: number): number {
    if (this.slash === -2 || (this.slash >= 0 && this.slash < at)) this.slash = this.chunk.indexOf(BACKSLASH, at);
    return this.slash;
  }

  /** From `at` inside a string (not in an escape): its closing quote's index, or -1 past this chunk; `\u`'s digits are plain bytes here. */
  stringEnd(at: number): number {
    const { chunk } = this;
    const n = chunk.length;
    this.lastEscape = -1;
    let k = at;
    let plain = DENSE_ESCAPES; // bytes since the last backslash
    while (k < n) {
      if (plain >= DENSE_ESCAPES) {
        const quote = this.nextQuote(k);
        const slash = this.nextSlash(k);
        if (slash < 0 || (quote >= 0 && quote < slash)) return quote;
        k = slash;
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
}

/**
 * Follows a JSON body as it arrives, linear in it: with a session, the image strings go unescaped to it (judged here, as
 * the parser of the rest never sees them) and the rest is kept; without one, it only finds the keys naming the image field.
 */
class BodyScanner {
  readonly images: StagedInlineImage[] = [];
  readonly imageFields: string[] = [];
  private readonly rest: Buffer[] = [];
  private restBytes = 0;
  private received = 0;
  // Structure outside the image strings.
  private depth = 0;
  private topIsObject = false;
  /** In the top-level object, where a key comes next. */
  private expectKey = false;
  private inString = false;
  /** In a string other than an image: the previous byte was a backslash. */
  private escapeNext = false;
  /** The raw bytes of the top-level key being read, while it may still be the image field's name. */
  private keyRaw: Buffer[] | undefined;
  private keyRawBytes = 0;
  /** The last top-level key, when it named the image field. */
  private key: string | undefined;
  private expectImages = false;
  private inImages = false;
  // Inside one image string.
  private upload: ImageUpload | undefined;
  /** An escape begun in one chunk and completed in the next, e.g. `\u00`. */
  private escape = "";
  /** Unescaped text of the image not yet handed to the session. */
  private text = "";

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
    const find = new ChunkSearch(chunk);
    let from = 0; // start of what is still to be kept of this chunk
    let i = 0;
    while (i < n) {
      if (this.upload) {
        if (this.escape) {
          // An escape split across chunks: completed byte by byte (at most five).
          while (i < n && this.escape.length < escapeLength(this.escape)) this.escape += String.fromCharCode(chunk[i++]!);
          if (this.escape.length < escapeLength(this.escape)) break;
          this.text += unescapeRun(this.escape, this.images.length);
          this.escape = "";
          continue;
        }
        const close = find.stringEnd(i);
        let end = close < 0 ? n : close;
        // An escape that goes on in the next chunk waits for it.
        if (close < 0 && find.lastEscape >= 0 && find.lastEscape + escapeLength(chunk.toString("latin1", find.lastEscape, find.lastEscape + 2)) > n) {
          end = find.lastEscape;
        }
        if (end > i) this.text += unescapeRun(chunk.toString("latin1", i, end), this.images.length);
        if (close < 0) {
          this.escape = chunk.toString("latin1", end, n);
          i = n;
          break;
        }
        // The image string ends: an empty string stands in for it in the rest of the body.
        i = close + 1;
        await this.handOn();
        this.images.push(await this.upload.finish());
        this.upload = undefined;
        this.keep(PLACEHOLDER);
        from = i;
        continue;
      }
      if (this.inString) {
        if (this.escapeNext) {
          this.escapeNext = false;
          this.collectKey(chunk, i, i + 1);
          i++;
          continue;
        }
        const close = find.stringEnd(i);
        const end = close < 0 ? n : close;
        this.collectKey(chunk, i, end);
        if (close < 0) {
          this.escapeNext = find.lastEscape === n - 1;
          i = n;
          break;
        }
        i = close + 1;
        this.inString = false;
        this.endKey();
        continue;
      }
      const byte = chunk[i]!;
      if (this.expectImages && this.depth === 1 && byte !== OPEN_ARRAY && !isSpace(byte)) this.expectImages = false;
      if (byte === QUOTE) {
        if (this.inImages && this.depth === 2 && this.session) {
          // An image string opens: what came before is structure, the string itself goes to staging.
          this.keep(chunk.subarray(from, i));
          this.upload = this.session.open();
          i++;
          continue;
        }
        this.inString = true;
        if (this.depth === 1 && this.expectKey) {
          this.expectKey = false;
          this.key = undefined;
          this.keyRaw = [];
          this.keyRawBytes = 0;
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
        if (this.depth === 2 && this.expectImages && byte === OPEN_ARRAY) this.inImages = true;
        this.expectImages = false;
      } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
        if (this.depth === 2) this.inImages = false;
        this.depth--;
      } else if (byte === COMMA && this.depth === 1) {
        this.expectKey = this.topIsObject;
      }
      i++;
    }
    if (this.upload) await this.handOn();
    else this.keep(chunk.subarray(from));
  }

  /** The image's text so far to the session: one piece per chunk, however many escapes it had. */
  private async handOn(): Promise<void> {
    if (!this.text) return;
    const text = this.text;
    this.text = "";
    await this.upload!.feed(text);
  }

  private collectKey(chunk: Buffer, start: number, end: number): void {
    if (!this.keyRaw || end <= start) return;
    this.keyRawBytes += end - start;
    if (this.keyRawBytes > MAX_KEY_RAW_BYTES) this.keyRaw = undefined;
    else this.keyRaw.push(Buffer.from(chunk.subarray(start, end)));
  }

  /** A string ended: if it was a top-level key, whether it names the image field (decoded as JSON decodes it). */
  private endKey(): void {
    if (!this.keyRaw) return;
    const raw = Buffer.concat(this.keyRaw).toString("utf8");
    this.keyRaw = undefined;
    let name: unknown;
    try {
      name = JSON.parse(`"${raw}"`);
    } catch {
      return; // not valid JSON: the parser of the rest refuses it
    }
    if (typeof name === "string" && IMAGE_FIELD_NAMES.has(name)) this.key = name;
  }

  /** The body has ended: its text with `""` for each image, the images staged, the keys that named the image field (one at most). */
  finish() {
    if (this.upload || this.escape) throw invalidJson("it ends inside a string");
    return { rest: Buffer.concat(this.rest), images: this.images, imageFields: this.imageFields };
  }
}

/** How long an escape that starts as `sequence` is: `\uXXXX` or two characters. */
const escapeLength = (sequence: string) => (sequence[1] === "u" ? 6 : 2);

/** A run of an image string (no closing quote, no escape cut in two) unescaped by JSON.parse itself, refused as the whole-body path would. */
function unescapeRun(raw: string, index: number): string {
  if (!raw.includes("\\") && !CONTROL.test(raw)) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    throw invalidJson(`input_images_base64[${index}] holds an invalid escape or an unescaped control character`);
  }
}

/**
 * Reads a large JSON body without holding it: each image string goes piece by piece to the core's staging, the rest
 * (at most `maxOtherBytes`, `""` where the images were) is kept to be parsed; backpressure reaches the socket. Exported for tests.
 */
export async function scanStreamedBody(
  chunks: AsyncIterable<Buffer>, session: StagingSession, limits: { maxBytes: number; maxOtherBytes: number },
): Promise<ReturnType<BodyScanner["finish"]>> {
  const scanner = new BodyScanner(limits, session);
  for await (const chunk of chunks) await scanner.push(chunk);
  return scanner.finish();
}

/** Refuses a whole body whose top-level object names the image field twice (namedTwice). */
const refuseNamedTwice = (body: Buffer) => new BodyScanner({ maxBytes: Infinity, maxOtherBytes: 0 }).push(body);

/** Whether a parsed body is a JSON object naming the image field (by either name). */
const namesImageField = (body: unknown) =>
  body !== null && typeof body === "object" && !Array.isArray(body) && [...IMAGE_FIELD_NAMES].some((name) => Object.hasOwn(body, name));

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

/**
 * A JSON parser that streams large bodies' images to the core's staging (only in-process: a remote core has none) and
 * reads the rest whole; both end in Fastify's parser and refuse the image field named twice, so the answers agree.
 */
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
      if (namesImageField(body)) await refuseNamedTwice(bytes);
      return body;
    }
    const session = staging.session();
    const entry = { session, images: [] as StagedInlineImage[] };
    staged.set(request, entry);
    try {
      const maxOtherBytes = otherFieldsBytes(staging.limits, options.maxOtherBytes);
      const scanned = await scanStreamedBody(keepOpen(payload), session, { maxBytes: limit, maxOtherBytes });
      const body = await parse(request, scanned.rest.toString("utf8"));
      // The field's strings were staged: it goes, unless it holds something else, which the mapping then refuses as it would whole.
      for (const name of scanned.imageFields) {
        const field = (body as Record<string, unknown>)[name];
        if (Array.isArray(field) && field.every((value) => value === "")) delete (body as Record<string, unknown>)[name];
      }
      entry.images = scanned.images;
      return body;
    } catch (error) {
      // Refused or abandoned while arriving: nothing it staged stays, before the answer leaves.
      await session.discard();
      throw error;
    }
  });
  // Refused after parsing (a schema, a rule): what the body staged goes before the error answer leaves.
  app.addHook("onError", async (request) => discardStaged(request));
  app.addHook("onResponse", discardStaged);
  app.addHook("onRequestAbort", discardStaged);
}
