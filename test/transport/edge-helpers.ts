import http2 from "node:http2";
import net from "node:net";
import { once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { ErrorDetailSchema, type ErrorDetail } from "../../gen/generation/v1/generation_service_pb.js";
import { decodeStatusDetails } from "../support/rpc-helpers.js";

/** Helpers of the edge tests: a raw HTTP/2 client that speaks the wire formats by hand, and identity-serialized grpc-js calls. */

/** A gRPC / gRPC-Web / Connect-stream envelope: flags, 4-byte big-endian length, payload. */
export function envelope(payload: Uint8Array, flags = 0, announcedLength = payload.byteLength): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt8(flags, 0);
  header.writeUInt32BE(announcedLength, 1);
  return Buffer.concat([header, payload]);
}

export interface RawAnswer {
  readonly status: number;
  readonly headers: http2.IncomingHttpHeaders;
  readonly trailers: http2.IncomingHttpHeaders;
  readonly body: Buffer;
  /** RST_STREAM code the stream ended with (0: NO_ERROR). */
  readonly rstCode: number | undefined;
  /** Milliseconds from the request to the end of the answer. */
  readonly ms: number;
}

/** One raw HTTP/2 connection to the core port, optionally from another loopback address. */
export function connectH2(url: string, localAddress?: string): http2.ClientHttp2Session {
  const { hostname, port } = new URL(url);
  const session = http2.connect(url, {
    createConnection: () => net.connect({ host: hostname, port: Number(port), ...(localAddress ? { localAddress } : {}) }),
  });
  session.on("error", () => {});
  return session;
}

/**
 * Sends headers and `chunks` on a new stream (ending it only when `end`),
 * and resolves when the server has answered and closed the stream.
 */
export async function rawCall(
  session: http2.ClientHttp2Session,
  path: string,
  headers: Record<string, string>,
  chunks: readonly Uint8Array[],
  end = true,
  onStream?: (stream: http2.ClientHttp2Stream) => void,
): Promise<RawAnswer> {
  const started = Date.now();
  const stream = session.request({ ":method": "POST", ":path": path, ...headers }, { endStream: false });
  stream.on("error", () => {});
  onStream?.(stream);
  for (const chunk of chunks) stream.write(chunk);
  if (end) stream.end();
  let responseHeaders: http2.IncomingHttpHeaders = {};
  let trailers: http2.IncomingHttpHeaders = {};
  const body: Buffer[] = [];
  stream.on("response", (h) => (responseHeaders = h));
  stream.on("trailers", (t) => (trailers = t));
  stream.on("data", (chunk: Buffer) => body.push(chunk));
  // A stream reset while the client still has data to send never emits "close" (Node waits for its writable side):
  // the server's RST_STREAM shows as "aborted", after which the answer read so far is complete once "end" comes.
  await Promise.race([once(stream, "close"), once(stream, "aborted")]);
  if (!stream.readableEnded && !stream.destroyed) await Promise.race([once(stream, "end"), once(stream, "close")]);
  return {
    status: Number(responseHeaders[":status"] ?? 0),
    headers: responseHeaders,
    trailers,
    body: Buffer.concat(body),
    rstCode: stream.rstCode,
    ms: Date.now() - started,
  };
}

/** The status of a gRPC answer: from its trailers, or from its headers when it is trailers-only. */
export function grpcStatusOf(answer: RawAnswer): { code: number; message: string; details: ErrorDetail[] } {
  const source = answer.trailers["grpc-status"] !== undefined ? answer.trailers : answer.headers;
  const bin = source["grpc-status-details-bin"];
  const details = typeof bin === "string" ? decodeStatusDetails(Buffer.from(bin, "base64")).details : [];
  return { code: Number(source["grpc-status"]), message: decodeURIComponent(String(source["grpc-message"] ?? "")), details };
}

/** The status of a gRPC-Web answer: the trailer frame (flag 0x80) at the end of its body, or its headers. */
export function grpcWebStatusOf(answer: RawAnswer): { code: number; message: string; details: ErrorDetail[] } {
  let offset = 0;
  while (offset + 5 <= answer.body.byteLength) {
    const flags = answer.body.readUInt8(offset);
    const length = answer.body.readUInt32BE(offset + 1);
    const payload = answer.body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if (flags & 0x80) {
      const fields: Record<string, string> = {};
      for (const line of payload.toString("utf8").split("\r\n")) {
        const colon = line.indexOf(":");
        if (colon > 0) fields[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const bin = fields["grpc-status-details-bin"];
      return {
        code: Number(fields["grpc-status"]),
        message: decodeURIComponent(fields["grpc-message"] ?? ""),
        details: bin ? decodeStatusDetails(Buffer.from(bin, "base64")).details : [],
      };
    }
  }
  return grpcStatusOf(answer);
}

/** A Connect error body ({code, message, details}) with its generation.v1.ErrorDetail decoded. */
export function connectErrorOf(json: any): { code: string; message: string; details: ErrorDetail[] } {
  const details = ((json?.details ?? []) as { type: string; value: string }[])
    .filter((d) => d.type === ErrorDetailSchema.typeName)
    .map((d) => fromBinary(ErrorDetailSchema, base64Decode(d.value)));
  return { code: json?.code, message: json?.message, details };
}

/** The end-of-stream message of a Connect streaming answer (flag 0x02), parsed. */
export function connectEndStreamOf(answer: RawAnswer): any {
  let offset = 0;
  while (offset + 5 <= answer.body.byteLength) {
    const flags = answer.body.readUInt8(offset);
    const length = answer.body.readUInt32BE(offset + 1);
    const payload = answer.body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if (flags & 0x02) return JSON.parse(payload.toString("utf8"));
  }
  return undefined;
}

const identity = (bytes: Buffer) => bytes;

/** A grpc-js unary call whose request is raw bytes (no serializer), as a client with its own encoder sends them. */
export function rawGrpcUnary(
  client: grpc.Client,
  path: string,
  message: Buffer,
  metadata = new grpc.Metadata(),
  deadlineMs = 30_000,
): Promise<{ error: grpc.ServiceError | null; response?: Buffer; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, identity, identity, message, metadata, { deadline: Date.now() + deadlineMs }, (error, response) =>
      resolve({ error, response, ms: Date.now() - started }),
    );
  });
}
