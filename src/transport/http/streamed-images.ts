import type { FastifyInstance, FastifyRequest } from "fastify";
import { createContextValues, type ContextValues } from "@connectrpc/connect";
import { STAGED_IMAGES, type ImageUpload, type InlineStaging, type StagingSession } from "../../core/jobs/inline-staging.js";
import type { StagedInlineImage } from "../../domain/validation/inline-images.js";
import { bodyTooLarge, sizeText } from "./error-replies.js";
import { GatewayError } from "./gateway-error.js";

/** The top-level field whose strings are images. */
const IMAGES_FIELD = "input_images_base64";
/** Longer top-level strings are not the field's name; their bytes are not collected. */
const MAX_KEY_BYTES = 64;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const ESCAPED: Record<string, string> = { "/": "/", "\\": "\\", '"': '"', n: "\n", r: "\r", t: "\t", b: "\b", f: "\f" };

const staged = new WeakMap<FastifyRequest, { session: StagingSession; images: StagedInlineImage[] }>();

/**
 * Removes what this request staged and no job took; awaited before the
 * answer leaves, so a refused or replayed request leaves nothing behind.
 * (Also run when the request ends, for any path that skipped it.)
 */
export async function discardStaged(request: FastifyRequest): Promise<void> {
  await staged.get(request)?.session.discard();
}

/**
 * The call's context values: the images staged while this request's body
 * arrived (none for a body parsed whole).
 */
export function stagedImagesOf(request: FastifyRequest): ContextValues | undefined {
  const entry = staged.get(request);
  return entry ? createContextValues().set(STAGED_IMAGES, entry.images) : undefined;
}

/**
 * Reads a large JSON body without holding it: every string of the top-level
 * `input_images_base64` array goes, piece by piece as it arrives, to the
 * core's staging (decoded into the blob store), and the rest of the body —
 * at most `maxOtherBytes` — is parsed as usual with those strings left out.
 * One pass, bytes in order; backpressure reaches the socket through `await`.
 */
async function parseStreaming(
  chunks: AsyncIterable<Buffer>, session: StagingSession, limits: { maxBytes: number; maxOtherBytes: number },
): Promise<{ body: unknown; images: StagedInlineImage[] }> {
  const images: StagedInlineImage[] = [];
  const other: Buffer[] = [];
  let otherBytes = 0;
  let received = 0;
  const keep = (bytes: Buffer) => {
    otherBytes += bytes.length;
    if (otherBytes > limits.maxOtherBytes) {
      throw new GatewayError(422, "input_too_large", `the request's fields besides input_images_base64 are larger than ${sizeText(limits.maxOtherBytes)}`);
    }
    other.push(bytes);
  };

  // Structure outside the image strings: container depth, strings, and whether the images array is open.
  let depth = 0;
  let inString = false;
  let escaped = false;
  let keyBytes: number[] = []; // the current top-level string, while it may still be the field's name
  let lastKey = "";
  let expectImagesArray = false;
  let inImages = false; // inside the images array (depth 2)
  // Inside one image string:
  let upload: ImageUpload | undefined;
  let pendingEscape = ""; // an escape split across chunks, e.g. "\u00" waiting for two more hex digits

  for await (const chunk of chunks) {
    received += chunk.length;
    if (received > limits.maxBytes) {
      throw bodyTooLarge(limits.maxBytes);
    }
    let from = 0; // start of the run of `chunk` still to be kept as structure
    let i = 0;
    while (i < chunk.length) {
      if (upload) {
        // Fast path: feed everything up to the next quote or backslash in one piece.
        if (pendingEscape) {
          pendingEscape += String.fromCharCode(chunk[i]!);
          i++;
          const text = unescape(pendingEscape);
          if (text !== undefined) {
            pendingEscape = "";
            await upload.feed(text);
          }
          continue;
        }
        const quote = chunk.indexOf(QUOTE, i);
        const slash = chunk.indexOf(BACKSLASH, i);
        const stop = quote < 0 ? slash : slash < 0 ? quote : Math.min(quote, slash);
        const end = stop < 0 ? chunk.length : stop;
        if (end > i) await upload.feed(chunk.toString("latin1", i, end));
        i = end;
        if (stop < 0) break;
        if (chunk[stop] === BACKSLASH) {
          pendingEscape = "\\";
          i++;
          continue;
        }
        // The image string ends: a null stands in for it in the rest of the body.
        images.push(await upload.finish());
        upload = undefined;
        i++;
        from = i;
        keep(Buffer.from("null"));
        continue;
      }
      const byte = chunk[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (byte === BACKSLASH) escaped = true;
        else if (byte === QUOTE) {
          inString = false;
          if (depth === 1) lastKey = Buffer.from(keyBytes).toString("latin1");
        } else if (depth === 1 && keyBytes.length <= MAX_KEY_BYTES) keyBytes.push(byte);
        i++;
        continue;
      }
      if (byte === QUOTE) {
        if (inImages && depth === 2) {
          // An image string opens: what came before is structure, the string itself goes to staging.
          keep(chunk.subarray(from, i));
          upload = session.open();
          i++;
          continue;
        }
        inString = true;
        keyBytes = [];
      } else if (byte === 0x3a /* : */ && depth === 1) {
        expectImagesArray = lastKey === IMAGES_FIELD;
      } else if (byte === 0x5b /* [ */ || byte === 0x7b /* { */) {
        depth++;
        if (byte === 0x5b && depth === 2 && expectImagesArray) inImages = true;
        expectImagesArray = false;
      } else if (byte === 0x5d /* ] */ || byte === 0x7d /* } */) {
        if (depth === 2 && inImages) inImages = false;
        depth--;
      } else if (byte === 0x2c /* , */ && depth === 1) {
        expectImagesArray = false;
      }
      i++;
    }
    if (!upload && from < chunk.length) keep(chunk.subarray(from));
  }
  if (upload || pendingEscape) throw new GatewayError(400, "invalid_json", "the body is not valid JSON: it ends inside a string");
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(other).toString("utf8"), (key, value) => (key === "__proto__" ? undefined : value));
  } catch (error) {
    throw new GatewayError(400, "invalid_json", `the body is not valid JSON: ${(error as Error).message}`);
  }
  if (body && typeof body === "object" && !Array.isArray(body)) {
    const field = (body as Record<string, unknown>).input_images_base64;
    if (Array.isArray(field) && field.every((value) => value === null)) delete (body as Record<string, unknown>).input_images_base64;
  }
  return { body, images };
}

/**
 * The body's chunks, without destroying the request when reading stops early
 * (a refusal): the answer must still reach the client.
 */
const keepOpen = (payload: FastifyRequest["raw"]) => payload.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>;

/** A body read whole, up to `limit` bytes (Content-Length was checked before; a chunked body is counted). */
async function readWhole(payload: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of payload) {
    size += chunk.length;
    if (size > limit) throw bodyTooLarge(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** An escape sequence's text once complete, undefined while it still needs characters. */
function unescape(sequence: string): string | undefined {
  const kind = sequence[1];
  if (kind === undefined) return undefined;
  if (kind !== "u") return ESCAPED[kind] ?? kind;
  if (sequence.length < 6) return undefined;
  return String.fromCharCode(Number.parseInt(sequence.slice(2, 6), 16) || 0);
}

export interface StreamedImagesOptions {
  /** The core's staging, when it runs in this process (read per request: the core opens after the gateway listens). */
  readonly staging: () => InlineStaging | undefined;
  /** Bodies announcing more than this (or no length) are streamed. */
  readonly streamAbove: number;
  /** What a body besides its images may take (MAX_BODY_BYTES). */
  readonly maxOtherBytes: number;
}

/**
 * Registers, in the calling plugin, a JSON parser that streams the inline
 * images of large bodies to the core's staging; small bodies take Fastify's
 * own parser. The staged images of a request are discarded when it ends
 * (acceptance has moved the ones it took by then).
 */
export function streamInlineImages(app: FastifyInstance, options: StreamedImagesOptions): void {
  const plain = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", async (request: FastifyRequest, payload: FastifyRequest["raw"]) => {
    const limit = request.routeOptions.bodyLimit ?? options.maxOtherBytes;
    const length = Number(request.headers["content-length"] ?? NaN);
    if (Number.isFinite(length) && length > limit) {
      throw bodyTooLarge(limit);
    }
    const staging = options.staging();
    if (!staging || (Number.isFinite(length) && length <= options.streamAbove)) {
      const text = await readWhole(keepOpen(payload), limit);
      return new Promise((resolve, reject) => plain(request, text, (error, body) => (error ? reject(error) : resolve(body))));
    }
    const session = staging.session();
    const entry = { session, images: [] as StagedInlineImage[] };
    staged.set(request, entry);
    try {
      const { body, images } = await parseStreaming(keepOpen(payload), session, { maxBytes: limit, maxOtherBytes: options.maxOtherBytes });
      entry.images = images;
      return body;
    } catch (error) {
      // Refused or abandoned while arriving: nothing it staged stays, before the answer leaves.
      await session.discard();
      throw error;
    }
  });
  app.addHook("onResponse", discardStaged);
  app.addHook("onRequestAbort", discardStaged);
}
