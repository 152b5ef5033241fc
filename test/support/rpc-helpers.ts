import { join } from "node:path";
import { readdirSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { fromBinary } from "@bufbuild/protobuf";
import { AnySchema } from "@bufbuild/protobuf/wkt";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { ErrorDetailSchema, type ErrorDetail } from "../../gen/generation/v1/generation_service_pb.js";
import { REPO_ROOT } from "./repo.js";

const PROTO_ROOT = join(REPO_ROOT, "proto");

/** The protos as any grpc-js user would load them: from the .proto files, not from our generated code. */
export function loadGrpcPackage() {
  const dir = join(PROTO_ROOT, "generation", "v1");
  const files = readdirSync(dir).filter((f) => f.endsWith(".proto")).map((f) => join(dir, f));
  const definition = protoLoader.loadSync(files, {
    includeDirs: [PROTO_ROOT],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
  });
  const loaded = grpc.loadPackageDefinition(definition) as any;
  return loaded.generation.v1 as Record<string, grpc.ServiceClientConstructor>;
}

/** grpc-js wants host:port, not a URL. */
export const grpcAddress = (url: string) => url.replace(/^https?:\/\//, "").replace(/\/+$/, "");

export function bearer(token: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

/** One unary call as a promise; rejects with the grpc-js ServiceError. */
export function unary<T = any>(client: grpc.Client, method: string, request: unknown, metadata = new grpc.Metadata()): Promise<T> {
  return new Promise((resolve, reject) => {
    (client as any)[method](request, metadata, { deadline: Date.now() + 15_000 }, (error: grpc.ServiceError | null, response: T) =>
      error ? reject(error) : resolve(response),
    );
  });
}

/** Runs a call that must fail and returns its error. */
export async function rpcError(call: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await call;
  } catch (error) {
    return error as grpc.ServiceError;
  }
  throw new Error("the call was expected to fail but succeeded");
}

/**
 * Decodes `grpc-status-details-bin` (a google.rpc.Status: 1 code, 2 message,
 * 3 repeated Any details) with the protobuf-es wire reader, and unpacks the
 * service's generation.v1.ErrorDetail from it.
 */
export function decodeStatusDetails(bytes: Uint8Array): { code: number; message: string; details: ErrorDetail[]; typeUrls: string[] } {
  const reader = new BinaryReader(bytes);
  let code = 0;
  let message = "";
  const details: ErrorDetail[] = [];
  const typeUrls: string[] = [];
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === WireType.Varint) code = reader.int32();
    else if (field === 2 && wireType === WireType.LengthDelimited) message = reader.string();
    else if (field === 3 && wireType === WireType.LengthDelimited) {
      const any = fromBinary(AnySchema, reader.bytes());
      typeUrls.push(any.typeUrl);
      if (any.typeUrl.endsWith(`/${ErrorDetailSchema.typeName}`)) details.push(fromBinary(ErrorDetailSchema, any.value));
    } else reader.skip(wireType);
  }
  return { code, message, details, typeUrls };
}

/** The ErrorDetail of a failed grpc-js call, read from its trailers. */
export function errorDetailOf(error: grpc.ServiceError) {
  const raw = error.metadata?.get("grpc-status-details-bin")[0];
  if (!raw) throw new Error(`no grpc-status-details-bin trailer on ${error.code} ${error.details}`);
  return decodeStatusDetails(typeof raw === "string" ? Buffer.from(raw, "base64") : new Uint8Array(raw));
}
