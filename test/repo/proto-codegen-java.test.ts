// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import type { DescEnum, DescFile, DescMessage } from "@bufbuild/protobuf";
import { file_generation_v1_admin_service } from "../../gen/generation/v1/admin_service_pb.js";
import { file_generation_v1_file_service } from "../../gen/generation/v1/file_service_pb.js";
import { file_generation_v1_generation_service } from "../../gen/generation/v1/generation_service_pb.js";
import { file_generation_v1_job } from "../../gen/generation/v1/job_pb.js";
import { file_generation_v1_model } from "../../gen/generation/v1/model_pb.js";
import { file_generation_v1_money } from "../../gen/generation/v1/money_pb.js";
import { file_generation_v1_text_service } from "../../gen/generation/v1/text_service_pb.js";
import { call, pico } from "../support/harness.js";
import { type ToolRun } from "../support/go-tools.js";
import { checkoutCopy, readerEnvironment, readmeBlock, runBlock, runBlockOk } from "../support/readme-blocks.js";
import { createReadmeCustomer, startReadmeService, type ReadmeService } from "../support/readme-service.js";

/**
 * A Java client generated from proto/ exactly as a Java team would: the Maven
 * project test/fixtures/java-client fetches protoc and protoc-gen-grpc-java from
 * Maven Central (protobuf-maven-plugin, every version pinned in its pom.xml),
 * generates the message classes and grpc-java stubs, and compiles them with its
 * Main. Every command is docs/clients-protos.md's (Java:
 * the blocks marked java-build, java-run and java-protoc), read from it and run
 * as written, in bash, from a copy of the checkout's proto/ and the fixture
 * (without its target/, so every run generates from the protos as they are now,
 * and nothing is written into the repository). The client runs against the
 * service as the README starts it (`npm start`: the core on 127.0.0.1:8081, see
 * test/support/readme-service.ts) over plaintext HTTP/2 with grpc-netty-shaded,
 * with the key in $KEY as after the walk-through, and what it printed is
 * checked against the service's own state. The document's plain `protoc`
 * commands, with the executables Maven fetched, write the same sources, byte
 * for byte.
 *
 * Needs Java 17+ and Maven 3.6.3+ on PATH; Maven's default local repository
 * (~/.m2/repository, as infra/fetch.sh uses) holds what it downloads.
 */

/** What the Java commands read: the protos and the Maven project. */
const CHECKOUT_PARTS = ["proto", "test/fixtures/java-client"];
/** Where `mvn -f test/fixtures/java-client/pom.xml package` builds, in the copy of the checkout. */
const TARGET = join("test", "fixtures", "java-client", "target");
/** The java_package every file declares, as a directory of the compiled classes. */
const JAVA_PACKAGE_DIR = join("com", "example", "generation", "v1");

const IMAGE_MODEL = "aimodel-3-pro-image";
const START_BALANCE = "10.00";

/** Our proto files (generation.v1): the fixture generates from these (proto/generation/**). */
const OUR_FILES: readonly DescFile[] = [
  file_generation_v1_admin_service,
  file_generation_v1_file_service,
  file_generation_v1_generation_service,
  file_generation_v1_job,
  file_generation_v1_model,
  file_generation_v1_money,
  file_generation_v1_text_service,
];

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

function ok(run: ToolRun, what: string): string {
  assert.equal(run.code, 0, `${what} failed (exit ${run.code}):\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

/** The first capture groups of `pattern` in `output`, failing with the whole output when it is missing. */
function match(output: string, pattern: RegExp): string[] {
  const found = pattern.exec(output);
  assert.ok(found, `expected ${pattern} in the output:\n${output}`);
  return found.slice(1);
}

/** The class files protoc's Java generator makes for a message (java_multiple_files: a top-level class; nested ones inside it). */
function messageClasses(message: DescMessage, outer = ""): string[] {
  const name = outer ? `${outer}$${message.name}` : message.name;
  return [
    `${name}.class`,
    `${name}OrBuilder.class`,
    ...message.nestedMessages.flatMap((nested) => messageClasses(nested, name)),
    ...message.nestedEnums.map((nested: DescEnum) => `${name}$${nested.name}.class`),
  ];
}

describe("a Java client generated from the protos with protoc and protoc-gen-grpc-java (Maven)", () => {
  let checkout: ReturnType<typeof checkoutCopy>;
  let buildDir: string;
  /** The Maven build runs once, for whichever test needs it first. */
  let built: Promise<void> | undefined;
  /** The README's service, started (once) by the first test that runs the client: it holds ports 8080 and 8081 only from then on. */
  let started: Promise<ReadmeService> | undefined;

  before(() => {
    checkout = checkoutCopy(CHECKOUT_PARTS);
    buildDir = join(checkout.dir, TARGET);
  });
  after(async () => {
    try {
      await (await started?.catch(() => undefined))?.stop();
    } finally {
      checkout?.remove();
    }
  });

  /** Java 17+ and Maven on PATH: a reader's shell, none of the service's variables set. */
  const env = (extra: NodeJS.ProcessEnv = {}) => readerEnvironment(extra);

  function build(): Promise<void> {
    // Cold, Maven downloads protoc, the grpc-java plugin and the jars: minutes on a slow network.
    built ??= runBlockOk("java-build", readmeBlock("java-build"), { cwd: checkout.dir, env: env(), timeoutMs: 300_000 }).then(() => {});
    return built;
  }

  function readmeService(): Promise<ReadmeService> {
    started ??= startReadmeService();
    return started;
  }

  /** The java-run command of docs/clients-protos.md (it addresses the README's service, 127.0.0.1:8081), with `$KEY` set to `key`. */
  function runClient(key: string): Promise<ToolRun> {
    return runBlock(readmeBlock("java-run").body, { cwd: checkout.dir, env: env({ KEY: key }), timeoutMs: 120_000 });
  }

  it("when Maven builds the fixture, then every message, enum and service of proto/generation is a compiled class in the java_package, with its java_outer_classname", async () => {
    await build();
    const classes = new Set(files(join(buildDir, "classes", JAVA_PACKAGE_DIR)).map((file) => relative(join(buildDir, "classes", JAVA_PACKAGE_DIR), file)));
    const expected: string[] = [];
    for (const file of OUR_FILES) {
      // java_outer_classname: the file's descriptor holder, e.g. GenerationServiceProto for generation_service.proto.
      expected.push(`${file.proto.options!.javaOuterClassname}.class`);
      // java_multiple_files: one top-level class per message and enum, not classes nested in the outer one.
      expected.push(...file.messages.flatMap((message) => messageClasses(message)));
      expected.push(...file.enums.map((enumeration) => `${enumeration.name}.class`));
      expected.push(...file.services.map((service) => `${service.name}Grpc.class`));
    }
    const missing = expected.filter((name) => !classes.has(name));
    assert.deepEqual(missing, [], `classes missing from ${JAVA_PACKAGE_DIR}; compiled: ${[...classes].sort().join(", ")}`);
    assert.ok(expected.length > 100, `${expected.length} classes expected`);
    assert.ok(classes.has("GenerationServiceGrpc$GenerationServiceBlockingStub.class"), "the grpc-java blocking stub");
  });

  it("when the protoc commands of docs/clients-protos.md are run with the protoc and protoc-gen-grpc-java that Maven fetched, then it writes exactly the Java sources the Maven build generated", async () => {
    await build();
    // protobuf-maven-plugin keeps the executables it fetched from Maven Central, and
    // the well-known types (google/protobuf/*.proto) it extracted from protobuf-java:
    // a protoc from Maven Central has no include/ directory beside it, as the release zip has.
    const executables = readdirSync(join(buildDir, "protoc-plugins"));
    const protoc = join(buildDir, "protoc-plugins", executables.find((name) => name.startsWith("protoc-") && !name.startsWith("protoc-gen-"))!);
    const grpcPlugin = join(buildDir, "protoc-plugins", executables.find((name) => name.startsWith("protoc-gen-grpc-java-"))!);
    const wellKnown = files(join(buildDir, "protoc-dependencies")).find((file) => file.endsWith(join("google", "protobuf", "timestamp.proto")));
    assert.ok(wellKnown, "protobuf-java's well-known types, extracted by the Maven build");
    const command = readmeBlock("java-protoc");
    // docs/clients-protos.md names them by version, with the platform left to a glob: the versions the pom pins.
    for (const executable of [protoc, grpcPlugin]) {
      assert.ok(command.body.includes(`"$TARGET"/protoc-plugins/${executable.replace(/^.*\//, "").replace(/-[a-z]+-[a-z0-9_]+\.exe$/, "-*.exe")}`), `the protoc commands of docs/clients-protos.md use ${executable}`);
    }
    await runBlockOk("java-protoc", command, { cwd: checkout.dir, env: env(), timeoutMs: 60_000 });
    const out = join(checkout.dir, /--java_out=(\S+)/.exec(command.body)![1]!);

    // The same files, byte for byte, as the plugin's two runs (messages, then stubs).
    const byMaven = new Map<string, string>();
    for (const dir of ["java", "grpc-java"]) {
      const root = join(buildDir, "generated-sources", "protobuf", dir);
      for (const file of files(root)) byMaven.set(relative(root, file), readFileSync(file, "utf8"));
    }
    const byProtoc = new Map(files(out).map((file) => [relative(out, file), readFileSync(file, "utf8")]));
    assert.deepEqual([...byProtoc.keys()].sort(), [...byMaven.keys()].sort());
    for (const [path, text] of byProtoc) assert.equal(text, byMaven.get(path), path);
    assert.ok(byProtoc.has(join(JAVA_PACKAGE_DIR, "GenerationServiceGrpc.java")));
  });

  it("when the Java client runs with the core's address and a key, then what it prints (models, prices, balances, the finished job) is the service's own state", async () => {
    await build();
    const service = await readmeService();
    const customer = await createReadmeCustomer(service, START_BALANCE);
    const output = ok(await runClient(customer.apiKey), "the Java client (the java-run command of docs/clients-protos.md)");

    // ListModels: the same catalog, in the same order, as REST's.
    const models = await call(service, "GET", "/api/v1/models");
    assert.equal(models.status, 200, models.text);
    const restIds: string[] = models.json.models.map((model: { id: string }) => model.id);
    const [count, ids] = match(output, /^models: (\d+): (.+)$/m);
    assert.equal(Number(count), restIds.length);
    assert.deepEqual(ids!.split(", "), restIds);
    const imagePrice: string = models.json.models.find((model: { id: string }) => model.id === IMAGE_MODEL).price.per_image["1K"];
    const [printedPrice] = match(output, new RegExp(`^price: ${IMAGE_MODEL} 1K (\\S+) USD per image$`, "m"));
    assert.equal(pico(printedPrice!), pico(imagePrice));

    // GetBalance before the job: the opening balance, nothing reserved.
    const [before, beforeReserved, beforeAvailable] = match(output, /^balance before: (\S+) USD \(reserved (\S+), available (\S+)\)$/m);
    assert.equal(pico(before!), pico(START_BALANCE));
    assert.equal(pico(beforeReserved!), 0n);
    assert.equal(pico(beforeAvailable!), pico(START_BALANCE));

    // CreateGeneration and GetJob: the job exists, is done, and cost its published price.
    const [jobId] = match(output, new RegExp(`^created image job ([0-9a-f-]{36}) \\(${IMAGE_MODEL}, 1:1, 1K\\): queued$`, "m"));
    const [charged, imageUrl] = match(output, new RegExp(`^job ${jobId}: done, charged (\\S+) USD, image/png at (\\S+)$`, "m"));
    const job = await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey });
    assert.equal(job.status, 200, job.text);
    assert.equal(job.json.status, "done");
    assert.equal(job.json.model, IMAGE_MODEL);
    assert.equal(pico(job.json.usage.charged), pico(imagePrice));
    assert.equal(pico(charged!), pico(imagePrice));
    const image = await fetch(imageUrl!);
    assert.equal(image.status, 200);
    assert.deepEqual([...new Uint8Array(await image.arrayBuffer()).subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], "the result is a PNG");

    // GetBalance after the job: exactly what REST says now, the opening balance less the price.
    const [afterBalance, afterReserved, afterAvailable] = match(output, /^balance after: (\S+) USD \(reserved (\S+), available (\S+)\)$/m);
    const restBalance = await call(service, "GET", "/api/v1/balance", { key: customer.apiKey });
    assert.equal(restBalance.status, 200, restBalance.text);
    const rest = restBalance.json as { balance: string; reserved: string; available: string };
    assert.deepEqual([afterBalance, afterReserved, afterAvailable], [rest.balance, rest.reserved, rest.available]);
    assert.equal(pico(afterBalance!), pico(START_BALANCE) - pico(imagePrice));
    assert.equal(pico(afterReserved!), 0n);
  });

  it("when the Java client runs with a key the service does not know, then it exits 1 with the gRPC code and the service's reason, and creates nothing", async () => {
    await build();
    await readmeService();
    const run = await runClient("gsk_not-a-key");
    assert.equal(run.code, 1, `exit ${run.code}:\n${run.stdout}\n${run.stderr}`);
    // ListModels needs no key; GetBalance is the first call that does.
    assert.match(run.stdout, /^models: \d+: /m);
    assert.match(run.stderr, /^failed: UNAUTHENTICATED .*\(reason invalid_api_key\)$/m);
    assert.doesNotMatch(run.stdout, /created image job/);
  });
});
