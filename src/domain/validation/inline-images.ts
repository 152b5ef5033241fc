import { invalid } from "../errors/domain-error.js";

export const DATA_URI = /^data:([a-z]+\/[a-z0-9.+-]+)?(;[a-z0-9-]+=[^;,]*)*;base64,/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

export interface InlineImage {
  readonly mimeType: string;
  /** The base64 payload without any data-URI prefix or whitespace. */
  readonly base64: string;
  readonly decodedBytes: number;
}

/** An inline image the gateway already decoded into the blob store while the request arrived. */
export interface StagedInlineImage {
  readonly mimeType: string;
  /** Where it waits in the blob store for its job. */
  readonly ref: string;
  readonly decodedBytes: number;
  /** SHA-256 of its text as sent, for the Idempotency-Key fingerprint. */
  readonly digest: string;
  /** Its first decoded bytes (up to STAGED_HEAD_BYTES): enough to read an image's dimensions. */
  readonly head: Uint8Array;
}

/** How much of a staged image's start is kept in memory, for what needs its header (its dimensions). */
export const STAGED_HEAD_BYTES = 64 * 1024;

/**
 * Accepts plain base64 or a data URI. The decoded size is computed from the
 * length so a 200 MiB payload is measured without being decoded twice.
 */
export function parseInlineImage(value: string, index: number): InlineImage {
  let mimeType = "application/octet-stream";
  let payload = value;
  const prefix = DATA_URI.exec(value);
  if (prefix) {
    mimeType = prefix[1] ?? mimeType;
    payload = value.slice(prefix[0].length);
  }
  payload = payload.replace(/\s+/g, "");
  if (payload.length === 0 || !BASE64.test(payload)) {
    throw invalid("invalid_input_image", `input_images_base64[${index}] is not base64 or a base64 data URI`, {
      field: `input_images_base64[${index}]`,
    });
  }
  const padding = payload.endsWith("==") ? 2 : payload.endsWith("=") ? 1 : 0;
  const decodedBytes = Math.floor((payload.length * 3) / 4) - padding;
  return { mimeType, base64: payload, decodedBytes };
}
