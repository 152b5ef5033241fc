import { invalid } from "../errors/domain-error.js";

export const DATA_URI = /^data:([a-z]+\/[a-z0-9.+-]+)?(;[a-z0-9-]+=[^;,]*)*;base64,/i;
const BASE64 = /^[A-Za-z0-9+/_-]*(={0,2})$/;

/**
 * Whether a base64 payload (whitespace removed) of `dataChars` characters
 * followed by `padding` '=' is well formed (RFC 4648): padding only completes
 * the last quantum ("xx==" or "xxx="), and an unpadded last quantum has 2 or
 * 3 characters, since a single one encodes no byte. Shared with the streaming
 * decoder, so whole and streamed images obey one grammar.
 */
export function wellFormedBase64(dataChars: number, padding: number): boolean {
  if (dataChars === 0) return false;
  const last = dataChars % 4;
  return padding === 0 ? last !== 1 : last + padding === 4 && last >= 2;
}

/** Bytes that `dataChars` base64 characters (padding left out) decode to. */
export const base64Bytes = (dataChars: number) => Math.floor((dataChars * 3) / 4);

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
 * Accepts plain base64 or a data URI (whitespace ignored; see
 * wellFormedBase64 for the padding). The decoded size is computed from the
 * length so a 200 MiB payload is measured without being decoded twice; it is
 * what the streaming decoder produces for the same text.
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
  const padding = BASE64.exec(payload)?.[1]?.length;
  if (padding === undefined || !wellFormedBase64(payload.length - padding, padding)) {
    throw invalid("invalid_input_image", `input_images_base64[${index}] is not base64 or a base64 data URI`, {
      field: `input_images_base64[${index}]`,
    });
  }
  return { mimeType, base64: payload, decodedBytes: base64Bytes(payload.length - padding) };
}
