import { create, toBinary, type DescEnum, type DescExtension, type DescFile, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import * as v1 from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";

/**
 * gRPC server reflection (https://github.com/grpc/grpc/blob/master/doc/server-reflection.md),
 * `grpc.reflection.v1.ServerReflection` and its older name
 * `grpc.reflection.v1alpha.ServerReflection` (same messages, same field
 * numbers), so grpcurl, buf curl, grpcui, Postman and the like can list,
 * describe and call the served services without the .proto files.
 *
 * What it describes is exactly the served services' files and their
 * transitive imports (the google/protobuf well-known types among them), as
 * the generated code embeds them: the public contract of proto/, nothing
 * else. It needs no credential and answers while the process is not ready
 * (the contract does not depend on any store).
 */

/** The two reflection services, as they are registered on the router and listed. */
export const REFLECTION_SERVICES: readonly DescService[] = [v1.ServerReflection, v1alpha.ServerReflection];

/** gRPC status codes of an ErrorResponse (the reflection protocol carries them as numbers). */
const NOT_FOUND = Code.NotFound;

/** A request's `message_request`, whichever version it came in (the two are the same shape). */
type MessageRequest =
  | { case: "fileByFilename" | "fileContainingSymbol" | "allExtensionNumbersOfType" | "listServices"; value: string }
  | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
  | { case: undefined; value?: undefined };

/** A response's `message_response`, as an init shape both versions' messages accept. */
type MessageResponse =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/** What reflection knows: every file, every symbol by its full name, every extension, every served service. */
class DescriptorIndex {
  private readonly files = new Map<string, DescFile>();
  /** Fully-qualified name (message, field, oneof, enum, enum value, service, method, extension) → the file declaring it. */
  private readonly symbols = new Map<string, DescFile>();
  private readonly messages = new Map<string, DescMessage>();
  private readonly extensions: DescExtension[] = [];
  private readonly encoded = new Map<string, Uint8Array>();
  readonly serviceNames: readonly string[];

  constructor(services: readonly DescService[]) {
    for (const service of services) this.addFile(service.file);
    this.serviceNames = [...new Set(services.map((service) => service.typeName))].sort();
  }

  private addFile(file: DescFile): void {
    const name = file.proto.name;
    if (this.files.has(name)) return;
    this.files.set(name, file);
    for (const dependency of file.dependencies) this.addFile(dependency);
    for (const message of file.messages) this.addMessage(file, message);
    for (const desc of file.enums) this.addEnum(file, desc);
    for (const extension of file.extensions) this.addExtension(file, extension);
    for (const service of file.services) {
      this.symbols.set(service.typeName, file);
      for (const method of service.methods) this.symbols.set(`${service.typeName}.${method.name}`, file);
    }
  }

  private addMessage(file: DescFile, message: DescMessage): void {
    this.symbols.set(message.typeName, file);
    this.messages.set(message.typeName, message);
    for (const field of message.fields) this.symbols.set(`${message.typeName}.${field.name}`, file);
    for (const oneof of message.oneofs) this.symbols.set(`${message.typeName}.${oneof.name}`, file);
    for (const nested of message.nestedMessages) this.addMessage(file, nested);
    for (const nested of message.nestedEnums) this.addEnum(file, nested);
    for (const nested of message.nestedExtensions) this.addExtension(file, nested);
  }

  private addEnum(file: DescFile, desc: DescEnum): void {
    this.symbols.set(desc.typeName, file);
    // Enum values are scoped like their enum, not inside it (C++ scoping): `generation.v1.JOB_STATUS_QUEUED`.
    const scope = desc.typeName.includes(".") ? desc.typeName.slice(0, desc.typeName.lastIndexOf(".") + 1) : "";
    for (const value of desc.values) this.symbols.set(`${scope}${value.name}`, file);
  }

  private addExtension(file: DescFile, extension: DescExtension): void {
    this.symbols.set(extension.typeName, file);
    this.extensions.push(extension);
  }

  fileByName(name: string): DescFile | undefined {
    return this.files.get(name);
  }

  fileContainingSymbol(symbol: string): DescFile | undefined {
    return this.symbols.get(symbol.startsWith(".") ? symbol.slice(1) : symbol);
  }

  message(typeName: string): DescMessage | undefined {
    return this.messages.get(typeName);
  }

  extensionsOf(typeName: string): DescExtension[] {
    return this.extensions.filter((extension) => extension.extendee.typeName === typeName);
  }

  /** `file` serialized, then every file it imports, transitively, each once (the file asked for first, as grpc-go sends them). */
  withDependencies(file: DescFile): Uint8Array[] {
    const order: DescFile[] = [];
    const seen = new Set<string>();
    const queue = [file];
    while (queue.length > 0) {
      const next = queue.shift()!;
      if (seen.has(next.proto.name)) continue;
      seen.add(next.proto.name);
      order.push(next);
      queue.push(...next.dependencies);
    }
    return order.map((each) => this.encode(each));
  }

  private encode(file: DescFile): Uint8Array {
    let bytes = this.encoded.get(file.proto.name);
    if (bytes === undefined) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      this.encoded.set(file.proto.name, bytes);
    }
    return bytes;
  }
}

/**
 * The answer to one reflection request. Every file descriptor answer carries
 * the file's transitive imports, also those sent earlier on the stream (the
 * protocol allows leaving them out; sending them keeps every answer complete
 * on its own, for clients that do not keep what they got, for a few KiB).
 */
function answer(index: DescriptorIndex, request: MessageRequest): MessageResponse {
  const notFound = (errorMessage: string): MessageResponse => ({ case: "errorResponse", value: { errorCode: NOT_FOUND, errorMessage } });
  const files = (file: DescFile | undefined, what: string): MessageResponse =>
    file === undefined ? notFound(what) : { case: "fileDescriptorResponse", value: { fileDescriptorProto: index.withDependencies(file) } };
  switch (request.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: index.serviceNames.map((name) => ({ name })) } };
    case "fileByFilename":
      return files(index.fileByName(request.value), `file not found: ${request.value}`);
    case "fileContainingSymbol":
      return files(index.fileContainingSymbol(request.value), `symbol not found: ${request.value}`);
    case "fileContainingExtension": {
      const { containingType, extensionNumber } = request.value;
      const extension = index.extensionsOf(containingType).find((each) => each.number === extensionNumber);
      return files(extension?.file, `extension not found: ${extensionNumber} of ${containingType}`);
    }
    case "allExtensionNumbersOfType": {
      if (index.message(request.value) === undefined) return notFound(`type not found: ${request.value}`);
      const numbers = index.extensionsOf(request.value).map((extension) => extension.number);
      return { case: "allExtensionNumbersResponse", value: { baseTypeName: request.value, extensionNumber: numbers } };
    }
    case undefined:
      // As grpc-go: a request that asks nothing ends the stream.
      throw new ConnectError("invalid ServerReflectionRequest: no message_request set", Code.InvalidArgument);
  }
}

/**
 * Both reflection services over `services` (the ones the port serves; the
 * reflection services are added to them). One index serves every stream.
 */
export function createReflectionServices(services: readonly DescService[]): {
  readonly v1: ServiceImpl<typeof v1.ServerReflection>;
  readonly v1alpha: ServiceImpl<typeof v1alpha.ServerReflection>;
} {
  const index = new DescriptorIndex([...services, ...REFLECTION_SERVICES]);
  return {
    v1: {
      async *serverReflectionInfo(requests) {
        for await (const request of requests) {
          yield create(v1.ServerReflectionResponseSchema, {
            validHost: request.host,
            originalRequest: request,
            messageResponse: answer(index, request.messageRequest),
          });
        }
      },
    },
    v1alpha: {
      async *serverReflectionInfo(requests) {
        for await (const request of requests) {
          yield create(v1alpha.ServerReflectionResponseSchema, {
            validHost: request.host,
            originalRequest: request,
            messageResponse: answer(index, request.messageRequest),
          });
        }
      },
    },
  };
}
