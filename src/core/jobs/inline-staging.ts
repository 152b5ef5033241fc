import { createHash, randomUUID } from "node:crypto";
import { createContextKey } from "@connectrpc/connect";
import { DomainError, invalid } from "../../domain/errors/domain-error.js";
import { toConnectError } from "../errors/rpc-errors.js";
import { InlineImageDecoder } from "../../domain/validation/inline-image-stream.js";
import { STAGED_HEAD_BYTES, type StagedInlineImage } from "../../domain/validation/inline-images.js";
import type { ValidationLimits } from "../../domain/validation/limits.js";
import type { BlobStore, BlobWriter } from "../../ports/blob-store.js";

/**
 * Inline images of a large request, staged in the blob store while the body
 * arrives, so a 200 MiB request is never held in memory as text, object and
 * bytes at once. The gateway beside the core hands the staged images to
 * CreateGeneration in the call's context values (they never come from a
 * client); acceptance moves them under the job, and whatever was not moved
 * is discarded when the call ends.
 */
export const STAGED_IMAGES = createContextKey<readonly StagedInlineImage[]>([], { description: "inline images staged by the gateway" });

/** Where staged uploads live until a job takes them (a crash's leftovers go with the retention sweep). */
const STAGING_PREFIX = "staging/";

/** Identifies an inline image's text for the Idempotency-Key fingerprint, however it arrived. */
export const inlineImageDigest = (text: string) => createHash("sha256").update(text).digest("hex");

/** Refusals leave the core as ConnectErrors, as from any RPC, so every edge maps them alike. */
const refusal = (error: DomainError) => toConnectError(error);
function refusing<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw error instanceof DomainError ? refusal(error) : error;
  }
}

export interface ImageUpload {
  /** One more piece of the image's JSON string value (already unescaped); a piece may be of any size. */
  feed(text: string): Promise<void>;
  finish(): Promise<StagedInlineImage>;
  abort(): Promise<void>;
}

/** One request's staged images: the limits apply to all of them together. */
export interface StagingSession {
  open(): ImageUpload;
  /** Removes every staged image not moved under a job (safe to call more than once). */
  discard(): Promise<void>;
}

export function createInlineStaging(blobs: BlobStore, limits: ValidationLimits) {
  return {
    /** The limits the staged images are held to (the gateway sizes what a streamed body may take besides them from these). */
    limits,
    session(): StagingSession {
      const refs: string[] = [];
      const writers: BlobWriter[] = [];
      let total = 0;
      return {
        open(): ImageUpload {
          const index = refs.length;
          if (index >= limits.maxInputImages) {
            throw refusal(invalid("too_many_input_images", `at most ${limits.maxInputImages} input images per request`, {
              field: "input_images_base64", limit: limits.maxInputImages,
            }));
          }
          const ref = `${STAGING_PREFIX}${randomUUID()}`;
          refs.push(ref);
          const decoder = new InlineImageDecoder(index);
          const digest = createHash("sha256");
          // The content type is known once the data-URI prefix is read; it is written with the blob at commit.
          let writer: BlobWriter | undefined;
          const sink = () => (writer ??= (writers.push(blobs.write(ref, decoder.mimeType)), writers.at(-1)!));
          const head: Uint8Array[] = [];
          let headBytes = 0;
          const take = async (bytes: Uint8Array) => {
            if (headBytes < STAGED_HEAD_BYTES && bytes.length) {
              const part = bytes.subarray(0, STAGED_HEAD_BYTES - headBytes);
              head.push(Uint8Array.from(part));
              headBytes += part.length;
            }
            total += bytes.length;
            if (total > limits.maxInputBytes) {
              throw refusal(invalid("input_too_large", `the input images exceed the ${limits.maxInputBytes}-byte limit together`, {
                limit: limits.maxInputBytes,
              }));
            }
            if (bytes.length) await sink().append(bytes);
          };
          return {
            async feed(text) {
              digest.update(text);
              await take(refusing(() => decoder.feed(text)));
            },
            async finish() {
              await take(refusing(() => decoder.finish()));
              await sink().commit();
              return {
                ref, mimeType: decoder.mimeType, decodedBytes: decoder.decodedBytes, digest: digest.digest("hex"), head: Buffer.concat(head),
              };
            },
            async abort() {
              await writer?.abort();
            },
          };
        },
        async discard() {
          await Promise.allSettled(writers.map((writer) => writer.abort()));
          await Promise.allSettled(refs.map((ref) => blobs.delete(ref)));
        },
      };
    },
  };
}

export type InlineStaging = ReturnType<typeof createInlineStaging>;
