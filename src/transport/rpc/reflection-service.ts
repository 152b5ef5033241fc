import { create, toBinary, type DescExtension, type DescFile, type DescService } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import * as v1 from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";

// gRPC server reflection (grpc/doc/server-reflection.md), v1 and v1alpha (same messages), hand-written: no maintained
// package serves it for Connect-ES v2. It describes exactly the served services' files and their imports, no credential needed.

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

/** What reflection knows: every file (serialized), every symbol by its full name, every extension, the served services. */
function indexOf(services: readonly DescService[]) {
  const files = new Map<string, { readonly file: DescFile; readonly bytes: Uint8Array }>();
  const symbols = new Map<string, DescFile>();
  const messages = new Set<string>();
  const extensions: DescExtension[] = [];
  const add = (file: DescFile): void => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, { file, bytes: toBinary(FileDescriptorProtoSchema, file.proto) });
    file.dependencies.forEach(add);
    for (const type of nestedTypes(file)) {
      symbols.set(type.typeName, file);
      if (type.kind === "message") {
        messages.add(type.typeName);
        for (const member of [...type.fields, ...type.oneofs]) symbols.set(`${type.typeName}.${member.name}`, file);
      } else if (type.kind === "service") {
        for (const method of type.methods) symbols.set(`${type.typeName}.${method.name}`, file);
      } else if (type.kind === "enum") {
        // Enum values are scoped like their enum, not inside it (C++ scoping): `generation.v1.JOB_STATUS_QUEUED`.
        const scope = type.typeName.slice(0, type.typeName.lastIndexOf(".") + 1);
        for (const value of type.values) symbols.set(`${scope}${value.name}`, file);
      } else {
        extensions.push(type);
      }
    }
  };
  services.forEach((service) => add(service.file));
  /** `file` serialized, then every file it imports, transitively, each once (the file asked for first, as grpc-go sends them). */
  const withDependencies = (file: DescFile): Uint8Array[] => {
    const order = new Set<DescFile>([file]);
    for (const next of order) next.dependencies.forEach((dependency) => order.add(dependency));
    return [...order].map((each) => files.get(each.proto.name)!.bytes);
  };
  const extensionsOf = (typeName: string) => extensions.filter((extension) => extension.extendee.typeName === typeName);
  const serviceNames = [...new Set(services.map((service) => service.typeName))].sort();
  return { files, symbols, messages, withDependencies, extensionsOf, serviceNames };
}

/** One reflection request's answer; a file comes with all its imports, so each answer is complete on its own for a few KiB. */
function answer(index: ReturnType<typeof indexOf>, request: MessageRequest): MessageResponse {
  const notFound = (errorMessage: string): MessageResponse => ({ case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage } });
  const files = (file: DescFile | undefined, what: string): MessageResponse =>
    file === undefined ? notFound(what) : { case: "fileDescriptorResponse", value: { fileDescriptorProto: index.withDependencies(file) } };
  switch (request.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: index.serviceNames.map((name) => ({ name })) } };
    case "fileByFilename":
      return files(index.files.get(request.value)?.file, `file not found: ${request.value}`);
    case "fileContainingSymbol":
      return files(index.symbols.get(request.value.replace(/^\./, "")), `symbol not found: ${request.value}`);
    case "fileContainingExtension": {
      const { containingType, extensionNumber } = request.value;
      const extension = index.extensionsOf(containingType).find((each) => each.number === extensionNumber);
      return files(extension?.file, `extension not found: ${extensionNumber} of ${containingType}`);
    }
    case "allExtensionNumbersOfType": {
      if (!index.messages.has(request.value)) return notFound(`type not found: ${request.value}`);
      const numbers = index.extensionsOf(request.value).map((extension) => extension.number);
      return { case: "allExtensionNumbersResponse", value: { baseTypeName: request.value, extensionNumber: numbers } };
    }
    case undefined:
      // As grpc-go: a request that asks nothing ends the stream.
      throw new ConnectError("invalid ServerReflectionRequest: no message_request set", Code.InvalidArgument);
  }
}

/** Both reflection services (their messages are the same) over `services`, the port's, with one index for every stream. */
export function reflectionServices(services: readonly DescService[]): [DescService, object][] {
  const index = indexOf([...services, v1.ServerReflection, v1alpha.ServerReflection]);
  const versions = [
    [v1.ServerReflection, v1.ServerReflectionResponseSchema],
    [v1alpha.ServerReflection, v1alpha.ServerReflectionResponseSchema],
  ] as const;
  return versions.map(([service, schema]) => [service, {
    async *serverReflectionInfo(requests: AsyncIterable<v1.ServerReflectionRequest>) {
      for await (const request of requests) {
        const messageResponse = answer(index, request.messageRequest);
        yield create(schema as typeof v1.ServerReflectionResponseSchema, { validHost: request.host, originalRequest: request, messageResponse });
      }
    },
  }]);
}
