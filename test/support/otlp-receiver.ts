import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** A span as an OTLP exporter sent it, with its process's service.name. */
export interface ReceivedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Record<string, string | number | boolean>;
  readonly events: string[];
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

/** Reads a message's fields: `onField` handles the ones it knows (returns true), the rest are skipped. */
function fields(bytes: Uint8Array, onField: (field: number, reader: BinaryReader, wireType: WireType) => boolean): void {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (!onField(field, reader, wireType)) reader.skip(wireType, field);
  }
}

/** opentelemetry.proto.common.v1.AnyValue: string, bool, int or double. */
function anyValue(bytes: Uint8Array): string | number | boolean | undefined {
  let value: string | number | boolean | undefined;
  fields(bytes, (field, reader) => {
    if (field === 1) value = reader.string();
    else if (field === 2) value = reader.bool();
    else if (field === 3) value = Number(reader.int64());
    else if (field === 4) value = reader.double();
    else return false;
    return true;
  });
  return value;
}

/** opentelemetry.proto.common.v1.KeyValue */
function keyValue(bytes: Uint8Array): [string, string | number | boolean | undefined] {
  let key = "";
  let value: string | number | boolean | undefined;
  fields(bytes, (field, reader) => {
    if (field === 1) key = reader.string();
    else if (field === 2) value = anyValue(reader.bytes());
    else return false;
    return true;
  });
  return [key, value];
}

function span(bytes: Uint8Array, service: string): ReceivedSpan {
  const s = { service, traceId: "", spanId: "", parentSpanId: "", name: "", kind: 0, attributes: {} as ReceivedSpan["attributes"], events: [] as string[] };
  fields(bytes, (field, reader) => {
    switch (field) {
      case 1: s.traceId = hex(reader.bytes()); return true;
      case 2: s.spanId = hex(reader.bytes()); return true;
      case 4: s.parentSpanId = hex(reader.bytes()); return true;
      case 5: s.name = reader.string(); return true;
      case 6: s.kind = reader.int32(); return true;
      case 9: {
        const [key, value] = keyValue(reader.bytes());
        if (value !== undefined) s.attributes[key] = value;
        return true;
      }
      case 11: // Event: name is field 2
        fields(reader.bytes(), (eventField, eventReader) => {
          if (eventField !== 2) return false;
          s.events.push(eventReader.string());
          return true;
        });
        return true;
      default:
        return false;
    }
  });
  return s;
}

/** Decodes an ExportTraceServiceRequest (OTLP/protobuf): resource_spans → resource (service.name) and scope_spans → spans. */
export function decodeTraces(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  fields(body, (field, reader) => {
    if (field !== 1) return false;
    let service = "";
    const scopeSpans: Uint8Array[] = [];
    fields(reader.bytes(), (rsField, rsReader) => {
      if (rsField === 1) {
        fields(rsReader.bytes(), (resourceField, resourceReader) => {
          if (resourceField !== 1) return false;
          const [key, value] = keyValue(resourceReader.bytes());
          if (key === "service.name") service = String(value);
          return true;
        });
        return true;
      }
      if (rsField === 2) {
        scopeSpans.push(rsReader.bytes());
        return true;
      }
      return false;
    });
    for (const scope of scopeSpans) {
      fields(scope, (scopeField, scopeReader) => {
        if (scopeField !== 2) return false;
        spans.push(span(scopeReader.bytes(), service));
        return true;
      });
    }
    return true;
  });
  return spans;
}

/**
 * An OTLP/HTTP receiver on loopback for the tests (the OpenTelemetry
 * Collector is not installable here): POST /v1/traces with a protobuf body,
 * decoded into spans; answers as a collector does (200, an empty
 * ExportTraceServiceResponse).
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  private server?: Server;
  url = "";

  async start(): Promise<this> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        if (request.method !== "POST" || request.url !== "/v1/traces") {
          response.writeHead(404).end();
          return;
        }
        let body = Buffer.concat(chunks);
        if (request.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        this.spans.push(...decodeTraces(body));
        response.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
