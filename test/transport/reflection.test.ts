// backends: embedded
import { after, before, describe, it, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { create, createFileRegistry, fromBinary, type DescService } from "@bufbuild/protobuf";
import { file_google_protobuf_empty, FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { Readiness } from "../../src/core/health/readiness.js";
import { DEFAULT_RPC_EDGE, listenRpc } from "../../src/transport/rpc/rpc-server.js";
import { BodyBudget } from "../../src/transport/upload-slots.js";
import { createCustomer, eventually, startTestService, type Customer, type TestService } from "../support/harness.js";
import { goTool, runTool } from "../support/go-tools.js";
import { grpcAddress } from "../support/rpc-helpers.js";
import { connectH2, envelope, grpcStatusOf, grpcWebStatusOf, rawCall, rawGrpcUnary, type RawAnswer } from "./edge-helpers.js";
import { REPO_ROOT } from "../support/repo.js";

const ROOT = REPO_ROOT;
const PROTO_ROOT = join(ROOT, "proto");
const BUF = join(ROOT, "node_modules", ".bin", "buf");

/** Every service the core port serves, as reflection must list them. */
const SERVED = [
  "generation.v1.AccountService",
  "generation.v1.AdminService",
  "generation.v1.FileService",
  "generation.v1.GenerationService",
  "generation.v1.TextService",
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
];

/** grpcurl's rendering of one method: `rpc Name ( [stream ].pkg.Request ) returns ( [stream ].pkg.Response );`. */
function grpcurlMethodLine(service: DescService, name: string): RegExp {
  const method = service.methods.find((each) => each.name === name)!;
  const clientStream = method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming" ? "stream " : "";
  const serverStream = method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming" ? "stream " : "";
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(
    `rpc ${name} \\( ${clientStream}\\.${escape(method.input.typeName)} \\) returns \\( ${serverStream}\\.${escape(method.output.typeName)} \\);`,
  );
}

/** A reflection request as proto-loader takes it (oneof `message_request` by its field's name). */
type ReflectionRequest = { host?: string } & (
  | { list_services: string }
  | { file_by_filename: string }
  | { file_containing_symbol: string }
  | { all_extension_numbers_of_type: string }
  | { file_containing_extension: { containing_type: string; extension_number: number } }
);

interface ReflectionResponse {
  valid_host: string;
  original_request: Record<string, unknown>;
  message_response: string;
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  list_services_response?: { service: { name: string }[] };
  all_extension_numbers_response?: { base_type_name: string; extension_number: number[] };
  error_response?: { error_code: number; error_message: string };
}

/** A plain grpc-js client of `grpc.reflection.<version>.ServerReflection`, loaded from the vendored .proto as any grpc-js user loads it. */
function reflectionClient(address: string, version: "v1" | "v1alpha"): grpc.Client {
  const definition = protoLoader.loadSync(`grpc/reflection/${version}/reflection.proto`, { includeDirs: [PROTO_ROOT], oneofs: true, keepCase: true, arrays: true });
  const loaded = grpc.loadPackageDefinition(definition) as any;
  return new loaded.grpc.reflection[version].ServerReflection(address, grpc.credentials.createInsecure());
}

/** Sends `requests` on one ServerReflectionInfo stream and resolves with the answers once the server has ended it. */
function reflect(client: grpc.Client, requests: readonly ReflectionRequest[]): Promise<ReflectionResponse[]> {
  return new Promise((resolve, reject) => {
    const call: grpc.ClientDuplexStream<ReflectionRequest, ReflectionResponse> = (client as any).ServerReflectionInfo({
      deadline: Date.now() + 15_000,
    });
    const answers: ReflectionResponse[] = [];
    call.on("data", (answer: ReflectionResponse) => answers.push(answer));
    call.on("error", reject);
    call.on("end", () => resolve(answers));
    for (const request of requests) call.write(request);
    call.end();
  });
}

/** The file descriptors of one answer, decoded, and a registry built from them (which fails if any import is missing). */
function filesOf(answer: ReflectionResponse) {
  assert.equal(answer.message_response, "file_descriptor_response", JSON.stringify(answer.error_response));
  const files = answer.file_descriptor_response!.file_descriptor_proto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes));
  const byName = new Map(files.map((file) => [file.name, file]));
  // Imports before importers (createFileRegistry's own resolver may order a deep import after its importer).
  const ordered: typeof files = [];
  const visit = (name: string) => {
    const file = byName.get(name);
    assert.ok(file, `the answer carries ${name}`);
    if (ordered.includes(file)) return;
    for (const dependency of file.dependency) visit(dependency);
    ordered.push(file);
  };
  visit(files[0]!.name);
  return { names: files.map((file) => file.name), registry: createFileRegistry(create(FileDescriptorSetSchema, { file: ordered })) };
}

/**
 * A service the core does not serve, as a Connect client would have it from its own generated code:
 * `package.Service` with one method taking and returning google.protobuf.Empty.
 */
function unservedService(pkg: string, service: string, method: string): DescService {
  const file = create(FileDescriptorProtoSchema, {
    name: `unserved/${pkg}/${service}.proto`,
    package: pkg,
    syntax: "proto3",
    dependency: ["google/protobuf/empty.proto"],
    service: [{ name: service, method: [{ name: method, inputType: ".google.protobuf.Empty", outputType: ".google.protobuf.Empty" }] }],
  });
  const registry = createFileRegistry(file, (name) => (name === file_google_protobuf_empty.proto.name ? file_google_protobuf_empty : undefined));
  return registry.getService(`${pkg}.${service}`)!;
}

/** Readiness as after a normal start: a store requests need, a bus they do not, both up. */
function startedReadiness(): Readiness {
  const readiness = new Readiness(5);
  readiness.track("store", { neededByRequests: true });
  readiness.markStarted();
  return readiness;
}

describe("gRPC server reflection and unknown methods on the core port", () => {
  let service: TestService;
  let customer: Customer;
  let address: string;
  const grpcurl = () => goTool("grpcurl");

  before(async () => {
    service = await startTestService();
    customer = await createCustomer(service, "3.25");
    address = grpcAddress(service.grpcUrl);
  });
  after(async () => {
    await service?.close();
  });

  /** A second core port on the test service's Core, with a Readiness (and body memory) the test controls. */
  async function serveWith(t: TestContext, readiness: Readiness, options: { bodyBudget?: BodyBudget; requestTimeoutMs?: number } = {}) {
    const crashes: string[] = [];
    const rpc = await listenRpc(service.running.core!, "127.0.0.1", 0, (message) => crashes.push(message), readiness, {
      ...DEFAULT_RPC_EDGE,
      edge: { ...DEFAULT_RPC_EDGE.edge, requestTimeoutMs: options.requestTimeoutMs ?? DEFAULT_RPC_EDGE.edge.requestTimeoutMs },
      ...(options.bodyBudget ? { bodyBudget: options.bodyBudget } : {}),
    });
    t.after(async () => {
      await rpc.close();
      assert.deepEqual(crashes, [], "no RPC was logged as a crash");
    });
    return `127.0.0.1:${rpc.port}`;
  }

  describe("with grpcurl (no -proto, no -protoset)", () => {
    it("when grpcurl lists the services, then it names every served service, health and both reflection services", async () => {
      const listed = await runTool(grpcurl(), ["-plaintext", address, "list"]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(listed.stdout.trim().split("\n"), SERVED);
    });

    it("when grpcurl describes generation.v1.GenerationService, then it shows every method with its request and response types", async () => {
      const described = await runTool(grpcurl(), ["-plaintext", address, "describe", "generation.v1.GenerationService"]);
      assert.equal(described.code, 0, described.stderr);
      assert.match(described.stdout, /^generation\.v1\.GenerationService is a service:/);
      for (const method of GenerationService.methods) assert.match(described.stdout, grpcurlMethodLine(GenerationService, method.name));
      // Streaming methods are described as such; every other served service is described too.
      for (const served of [TextService, FileService, AdminService, Health]) {
        const other = await runTool(grpcurl(), ["-plaintext", address, "describe", served.typeName]);
        assert.equal(other.code, 0, other.stderr);
        for (const method of served.methods) assert.match(other.stdout, grpcurlMethodLine(served, method.name), served.typeName);
      }
    });

    it("when grpcurl describes a message built on well-known types, then their files come with it (google.protobuf.Struct, Timestamp)", async () => {
      const request = await runTool(grpcurl(), ["-plaintext", address, "describe", "generation.v1.CreateGenerationRequest"]);
      assert.equal(request.code, 0, request.stderr);
      assert.match(request.stdout, /\.google\.protobuf\.Struct metadata = 8;/);
      const struct = await runTool(grpcurl(), ["-plaintext", address, "describe", "google.protobuf.Struct"]);
      assert.equal(struct.code, 0, struct.stderr);
      assert.match(struct.stdout, /map<string, \.google\.protobuf\.Value> fields = 1;/);
      const timestamp = await runTool(grpcurl(), ["-plaintext", address, "describe", "google.protobuf.Timestamp"]);
      assert.equal(timestamp.code, 0, timestamp.stderr);
      assert.match(timestamp.stdout, /int64 seconds = 1;/);
    });

    it("when grpcurl calls GetBalance with an authorization: Bearer header, then it prints the account's balance as JSON", async () => {
      const called = await runTool(grpcurl(), [
        "-plaintext", "-H", `authorization: Bearer ${customer.apiKey}`, address, "generation.v1.GenerationService/GetBalance",
      ]);
      assert.equal(called.code, 0, called.stderr);
      const answer = JSON.parse(called.stdout) as { balance: { balance: string; available: string; currency: string } };
      assert.equal(answer.balance.balance, "3.25");
      assert.equal(answer.balance.available, "3.25");
      assert.equal(answer.balance.currency, "USD");
    });

    it("when grpcurl calls with a wrong key, then it shows Unauthenticated and the ErrorDetail decoded through reflection", async () => {
      const called = await runTool(grpcurl(), ["-plaintext", "-H", "authorization: Bearer wrong", address, "generation.v1.GenerationService/GetBalance"]);
      assert.notEqual(called.code, 0);
      const output = called.stdout + called.stderr;
      assert.match(output, /Code: Unauthenticated/);
      assert.match(output, /"@type": "type\.googleapis\.com\/generation\.v1\.ErrorDetail"/);
      assert.match(output, /"reason": "invalid_api_key"/);
    });

    it("when grpcurl calls ListModels with a request body and no key, then it gets every model", async () => {
      const called = await runTool(grpcurl(), ["-plaintext", "-d", "{}", address, "generation.v1.GenerationService/ListModels"]);
      assert.equal(called.code, 0, called.stderr);
      const answer = JSON.parse(called.stdout) as { models: { id: string; kind: string }[] };
      assert.ok(answer.models.length > 0);
      assert.ok(answer.models.some((model) => model.kind === "MODEL_KIND_IMAGE"), called.stdout.slice(0, 500));
    });
  });

  describe("with buf curl (no --schema)", () => {
    const url = (path: string) => `${service.grpcUrl.replace(/\/+$/, "")}${path}`;

    it("when buf curl calls ListModels over gRPC, then it gets every model through reflection", async () => {
      const called = await runTool(BUF, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", url("/generation.v1.GenerationService/ListModels")]);
      assert.equal(called.code, 0, called.stderr);
      const answer = JSON.parse(called.stdout) as { models: { id: string }[] };
      assert.ok(answer.models.length > 0);
    });

    it("when buf curl is told to reflect with grpc-v1alpha only, then the older reflection service answers as well", async () => {
      const called = await runTool(BUF, [
        "curl", "--protocol", "grpc", "--http2-prior-knowledge", "--reflect-protocol", "grpc-v1alpha",
        "-H", `authorization: Bearer ${customer.apiKey}`, url("/generation.v1.GenerationService/GetBalance"),
      ]);
      assert.equal(called.code, 0, called.stderr);
      assert.equal((JSON.parse(called.stdout) as { balance: { balance: string } }).balance.balance, "3.25");
    });

    it("when buf curl uses the Connect protocol, then reflection and the call work there too", async () => {
      const called = await runTool(BUF, [
        "curl", "--http2-prior-knowledge", "-H", `authorization: Bearer ${customer.apiKey}`, url("/generation.v1.GenerationService/GetBalance"),
      ]);
      assert.equal(called.code, 0, called.stderr);
      assert.equal((JSON.parse(called.stdout) as { balance: { balance: string } }).balance.balance, "3.25");
    });

    it("when buf curl lists the methods, then every method of every served service is there", async () => {
      const listed = await runTool(BUF, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "--list-methods", url("")]);
      assert.equal(listed.code, 0, listed.stderr);
      const methods = new Set(listed.stdout.trim().split("\n"));
      for (const served of [GenerationService, TextService, AdminService, FileService, Health]) {
        for (const method of served.methods) assert.ok(methods.has(`${served.typeName}/${method.name}`), `${served.typeName}/${method.name}`);
      }
    });
  });

  describe("with a plain grpc-js client of each reflection version", () => {
    for (const version of ["v1", "v1alpha"] as const) {
      it(`when grpc.reflection.${version} is asked to list, then it answers every served service and echoes host and request`, async () => {
        const client = reflectionClient(address, version);
        try {
          const [answer] = await reflect(client, [{ host: "api.example", list_services: "*" }]);
          assert.equal(answer!.valid_host, "api.example");
          assert.equal(answer!.original_request.list_services, "*");
          assert.deepEqual(answer!.list_services_response!.service.map((each) => each.name), SERVED);
        } finally {
          client.close();
        }
      });

      it(`when grpc.reflection.${version} is asked for the file of a symbol, then the file comes with every file it imports`, async () => {
        const client = reflectionClient(address, version);
        try {
          const answers = await reflect(client, [
            { file_containing_symbol: "generation.v1.GenerationService" },
            { file_containing_symbol: "generation.v1.TextService.StreamGenerateContent" },
            { file_containing_symbol: "generation.v1.ErrorDetail.reason" },
            { file_by_filename: "generation/v1/admin_service.proto" },
            { file_by_filename: "google/protobuf/struct.proto" },
            { file_containing_symbol: "grpc.reflection.v1alpha.ServerReflection" },
          ]);
          assert.equal(answers.length, 6);
          // The registry is built from the answer alone: an import left out would make it throw.
          const generation = filesOf(answers[0]!);
          assert.equal(generation.names[0], "generation/v1/generation_service.proto", "the file asked for comes first");
          for (const name of ["generation/v1/job.proto", "generation/v1/model.proto", "generation/v1/money.proto", "google/protobuf/struct.proto"]) {
            assert.ok(generation.names.includes(name), `${name} in ${generation.names.join(", ")}`);
          }
          const served = generation.registry.getService("generation.v1.GenerationService")!;
          assert.deepEqual(served.methods.map((method) => method.name), GenerationService.methods.map((method) => method.name));
          assert.equal(filesOf(answers[1]!).names[0], "generation/v1/text_service.proto");
          assert.equal(filesOf(answers[2]!).names[0], "generation/v1/generation_service.proto");
          const admin = filesOf(answers[3]!);
          assert.ok(admin.names.includes("google/protobuf/timestamp.proto"), admin.names.join(", "));
          assert.ok(admin.registry.getMessage("google.protobuf.Timestamp"));
          assert.deepEqual(filesOf(answers[4]!).names, ["google/protobuf/struct.proto"]);
          assert.ok(filesOf(answers[5]!).registry.getService("grpc.reflection.v1alpha.ServerReflection"));
          // The file options of the contract travel with it (Go, Java, … generation from reflected descriptors).
          const file = generation.registry.getFile("generation/v1/generation_service.proto")!;
          assert.match(file.proto.options?.goPackage ?? "", /;generationv1$/);
        } finally {
          client.close();
        }
      });

      it(`when grpc.reflection.${version} is asked for what does not exist, then it answers NOT_FOUND and the stream goes on`, async () => {
        const client = reflectionClient(address, version);
        try {
          const answers = await reflect(client, [
            { file_containing_symbol: "generation.v1.NoSuchThing" },
            { file_by_filename: "secrets.proto" },
            { file_containing_extension: { containing_type: "generation.v1.Job", extension_number: 1000 } },
            { all_extension_numbers_of_type: "generation.v1.Job" },
            { all_extension_numbers_of_type: "generation.v1.NoSuchThing" },
            { list_services: "" },
          ]);
          assert.deepEqual(
            answers.map((answer) => answer.error_response?.error_code),
            [grpc.status.NOT_FOUND, grpc.status.NOT_FOUND, grpc.status.NOT_FOUND, undefined, grpc.status.NOT_FOUND, undefined],
          );
          assert.deepEqual(answers[3]!.all_extension_numbers_response, { base_type_name: "generation.v1.Job", extension_number: [] });
          assert.equal(answers[5]!.list_services_response!.service.length, SERVED.length);
        } finally {
          client.close();
        }
      });
    }
  });

  describe("unknown methods and services", () => {
    const unknown = [
      unservedService("generation.v1", "GenerationService", "NoSuchMethod"),
      unservedService("no.such", "Service", "Call"),
    ];

    it("when grpc-js calls a method or service the core does not serve, then it gets UNIMPLEMENTED", async () => {
      const client = new grpc.Client(address, grpc.credentials.createInsecure());
      try {
        for (const path of ["/generation.v1.GenerationService/NoSuchMethod", "/no.such.Service/Call", "/grpc.reflection.v1.ServerReflection/Nope"]) {
          const { error } = await rawGrpcUnary(client, path, Buffer.alloc(0));
          assert.equal(error?.code, grpc.status.UNIMPLEMENTED, `${path}: ${error?.code} ${error?.details}`);
          assert.match(error!.details, /unknown method/);
        }
      } finally {
        client.close();
      }
    });

    it("when gRPC and gRPC-Web calls reach an unknown method, then the answer is HTTP 200 with grpc-status 12 in trailers-only headers", async () => {
      const session = connectH2(service.grpcUrl);
      try {
        const grpcAnswer: RawAnswer = await rawCall(session, "/no.such.Service/Call", { "content-type": "application/grpc", te: "trailers" }, [envelope(new Uint8Array())]);
        assert.equal(grpcAnswer.status, 200);
        assert.equal(grpcAnswer.headers["grpc-status"], "12");
        assert.equal(grpcStatusOf(grpcAnswer).code, grpc.status.UNIMPLEMENTED);
        const webAnswer = await rawCall(session, "/generation.v1.GenerationService/NoSuchMethod", {
          "content-type": "application/grpc-web+proto",
          "x-grpc-web": "1",
        }, [envelope(new Uint8Array())]);
        assert.equal(webAnswer.status, 200);
        assert.equal(webAnswer.headers["grpc-status"], "12");
        assert.equal(grpcWebStatusOf(webAnswer).code, grpc.status.UNIMPLEMENTED);
      } finally {
        session.destroy();
      }
    });

    it("when a Connect call reaches an unknown method, then it gets HTTP 404 with Connect's unimplemented JSON error", async () => {
      const session = connectH2(service.grpcUrl);
      try {
        for (const contentType of ["application/proto", "application/json", "application/connect+proto"]) {
          const answer = await rawCall(session, "/no.such.Service/Call", { "content-type": contentType, "connect-protocol-version": "1" }, [
            Buffer.from(contentType === "application/json" ? "{}" : ""),
          ]);
          assert.equal(answer.status, 404, contentType);
          assert.match(String(answer.headers["content-type"]), /^application\/json/);
          const body = JSON.parse(answer.body.toString("utf8")) as { code: string; message: string };
          assert.equal(body.code, "unimplemented", contentType);
          assert.match(body.message, /unknown method \/no\.such\.Service\/Call/);
        }
      } finally {
        session.destroy();
      }
    });

    it("when connect-node clients of each protocol call an unknown method, then each gets Code.Unimplemented", async () => {
      const transports: [string, Transport][] = [
        ["connect", createConnectTransport({ baseUrl: service.grpcUrl, httpVersion: "2" })],
        ["grpc", createGrpcTransport({ baseUrl: service.grpcUrl })],
        ["grpc-web", createGrpcWebTransport({ baseUrl: service.grpcUrl, httpVersion: "2" })],
      ];
      for (const [protocol, transport] of transports) {
        for (const desc of unknown) {
          const client = createClient(desc, transport) as unknown as Record<string, (request: object) => Promise<unknown>>;
          const method = desc.methods[0]!.localName;
          const error = await client[method]!({}).then(
            () => assert.fail(`${protocol} ${desc.typeName}: the call succeeded`),
            (reason: unknown) => ConnectError.from(reason),
          );
          assert.equal(error.code, Code.Unimplemented, `${protocol} ${desc.typeName}: ${error.message}`);
        }
      }
    });
  });

  describe("reflection at the edge", () => {
    it("when the process is not ready, then reflection still answers while the other RPCs are refused UNAVAILABLE", async (t) => {
      const notReady = await serveWith(t, new Readiness(5));
      const listed = await runTool(goTool("grpcurl"), ["-plaintext", notReady, "list"]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(listed.stdout.trim().split("\n"), SERVED);
      const refused = await runTool(goTool("grpcurl"), [
        "-plaintext", "-H", `authorization: Bearer ${customer.apiKey}`, notReady, "generation.v1.GenerationService/GetBalance",
      ]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stdout + refused.stderr, /Code: Unavailable/);
    });

    it("when one reflection stream sends more than the body memory holds at once, then every request is answered and the memory goes back", async (t) => {
      // 1 KiB of body memory for the whole port; 100 requests of ~220 bytes on one stream are ~22 KiB in all.
      const budget = new BodyBudget(1024);
      const port = await serveWith(t, startedReadiness(), { bodyBudget: budget });
      const client = reflectionClient(port, "v1");
      try {
        const requests = Array.from({ length: 100 }, (_, i) => ({ file_containing_symbol: `generation.v1.${"X".repeat(200)}${i}` }));
        const answers = await reflect(client, requests);
        assert.equal(answers.length, 100);
        assert.ok(answers.every((answer) => answer.error_response?.error_code === grpc.status.NOT_FOUND));
        await eventually(async () => budget.inUse, (inUse) => inUse === 0, { timeoutMs: 5_000, what: "body memory given back" });
      } finally {
        client.close();
      }
    });

    it("when a reflection stream is kept open past HTTP_REQUEST_TIMEOUT, then it is answered first and then ends DEADLINE_EXCEEDED", async (t) => {
      const port = await serveWith(t, startedReadiness(), { requestTimeoutMs: 300 });
      const client = reflectionClient(port, "v1");
      try {
        const call: grpc.ClientDuplexStream<ReflectionRequest, ReflectionResponse> = (client as any).ServerReflectionInfo();
        const answers: ReflectionResponse[] = [];
        const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
          call.on("data", (answer: ReflectionResponse) => answers.push(answer));
          call.on("error", (error: grpc.ServiceError) => resolve(error));
          call.on("end", () => resolve(undefined));
        });
        call.write({ list_services: "" });
        // The stream is never half-closed: the edge's request timeout ends it.
        const error = await ended;
        assert.equal(answers.length, 1, "the request sent in time was answered");
        assert.equal(error?.code, grpc.status.DEADLINE_EXCEEDED, `${error?.code} ${error?.details}`);
      } finally {
        client.close();
      }
    });
  });
});
