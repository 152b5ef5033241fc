// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { accessSync, constants, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join, relative } from "node:path";
import type { DescFile } from "@bufbuild/protobuf";
import { file_generation_v1_admin_service } from "../../gen/generation/v1/admin_service_pb.js";
import { file_generation_v1_file_service } from "../../gen/generation/v1/file_service_pb.js";
import { file_generation_v1_generation_service, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { file_generation_v1_job } from "../../gen/generation/v1/job_pb.js";
import { file_generation_v1_model } from "../../gen/generation/v1/model_pb.js";
import { file_generation_v1_money } from "../../gen/generation/v1/money_pb.js";
import { file_generation_v1_text_service } from "../../gen/generation/v1/text_service_pb.js";
import { startTestService, type TestService } from "../support/harness.js";
import { goTool, runTool, type ToolRun } from "../support/go-tools.js";
import { grpcAddress } from "../support/rpc-helpers.js";
import { checkoutCopy, README_TESTS, readDoc, readerEnvironment, readmeBlock, runBlockOk } from "../support/readme-blocks.js";
import { REPO_ROOT } from "../support/repo.js";

/**
 * Clients in other languages, generated from proto/ exactly as a team would,
 * with the commands of docs/clients-protos.md (the
 * blocks marked go-codegen-template, go-codegen and python-codegen, read from
 * docs/clients-protos.md and run as written, in bash, from a copy of the checkout's
 * proto/ and buf files, so gen/ here is never written), compiled, and pointed
 * at a live core: Go (protoc-gen-go, protoc-gen-go-grpc, protoc-gen-connect-go
 * through `buf generate`; `go build` and `go vet`, then a grpc-go and a
 * connect-go call) and Python (grpcio-tools; every module imported, then a
 * grpcio call). The tools come from `bash infra/tools.sh` (the Go plugins on
 * PATH, the grpcio-tools venv activated); a missing one fails the test.
 */

const ROOT = REPO_ROOT;
const PROTO_PYTHON_BIN = join(ROOT, ".infra", "proto-python", "bin");
const PROTO_PYTHON = join(PROTO_PYTHON_BIN, "python");
/** What the Go commands read: the protos, buf's workspace, and the package that has buf (npx). */
const CHECKOUT_PARTS = ["proto", "buf.yaml", "package.json"];
/** The template file the go-codegen command of docs/clients-protos.md names, written from its go-codegen-template block. */
const GO_TEMPLATE = "buf.gen.go.yaml";

/** The Go module the go_package options name (a placeholder: see docs/clients-protos.md). */
const GO_MODULE = "github.com/example/generation-service/gen/go";
/** Pinned runtime modules of the generated Go code (the same versions as the plugins in infra/tools.sh). */
const GO_REQUIRES: Record<string, string> = {
  "google.golang.org/protobuf": "v1.36.12",
  "google.golang.org/grpc": "v1.85.0",
  "connectrpc.com/connect": "v1.21.1",
};

/** Our proto files (generation.v1). grpc/health and grpc/reflection are vendored: each language's gRPC library ships them. */
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

/** A tiny Go program: one call with each generated client (grpc-go and connect-go) against the address in argv[1]. */
const GO_CHECK = `package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	generationv1 "${GO_MODULE}/generation/v1"
	"${GO_MODULE}/generation/v1/generationv1connect"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	viaGrpc, err := generationv1.NewGenerationServiceClient(conn).ListModels(ctx, &generationv1.ListModelsRequest{})
	if err != nil {
		panic(err)
	}
	// The core port speaks HTTP/2 without TLS (h2c): Go's client does too once told (Go 1.24+).
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	client := generationv1connect.NewGenerationServiceClient(&http.Client{Transport: h2c}, "http://"+os.Args[1])
	viaConnect, err := client.ListModels(ctx, connect.NewRequest(&generationv1.ListModelsRequest{}))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(viaGrpc.GetModels()), len(viaConnect.Msg.GetModels()), viaGrpc.GetModels()[0].GetId())
}
`;

/** A tiny Python program: every generated module imported, every stub built, then ListModels over grpcio against argv[2]. */
const PYTHON_CHECK = `
import sys, grpc
sys.path.insert(0, sys.argv[1])
from generation.v1 import (admin_service_pb2, admin_service_pb2_grpc, file_service_pb2, file_service_pb2_grpc,
    generation_service_pb2, generation_service_pb2_grpc, job_pb2, model_pb2, money_pb2,
    text_service_pb2, text_service_pb2_grpc)
channel = grpc.insecure_channel(sys.argv[2])
stubs = [admin_service_pb2_grpc.AdminServiceStub(channel), file_service_pb2_grpc.FileServiceStub(channel),
    generation_service_pb2_grpc.GenerationServiceStub(channel), text_service_pb2_grpc.TextServiceStub(channel)]
methods = sorted(m.name for m in generation_service_pb2.DESCRIPTOR.services_by_name["GenerationService"].methods)
answer = stubs[2].ListModels(generation_service_pb2.ListModelsRequest(), timeout=15)
print(",".join(methods), len(answer.models), answer.models[0].id)
`;

/** `"name|module|package|version"` entries of infra/tools.sh: the pinned Go tools, by package. */
function pinnedGoTools(): Map<string, string> {
  const script = readFileSync(join(ROOT, "infra", "tools.sh"), "utf8");
  return new Map([...script.matchAll(/^\s*"[^|"]+\|[^|"]+\|([^|"]+)\|([^|"]+)"$/gm)].map((m) => [m[1]!, m[2]!]));
}

describe("clients generated from the protos in other languages", () => {
  let checkout: ReturnType<typeof checkoutCopy>;
  let work: string;
  let service: TestService;

  before(async () => {
    checkout = checkoutCopy(CHECKOUT_PARTS);
    work = checkout.dir;
    service = await startTestService();
  });
  after(async () => {
    await service?.close();
    checkout?.remove();
  });

  it("when docs/clients-protos.md names the plugins' and grpcio-tools' versions, then they are the ones infra/tools.sh installs", () => {
    const template = readmeBlock("go-codegen-template").body;
    const installs = [...template.matchAll(/go install (\S+)@(\S+)/g)].map((m) => [m[1]!, m[2]!] as const);
    assert.equal(installs.length, 3, `the template names how to install each of its three plugins:\n${template}`);
    const pinned = pinnedGoTools();
    for (const [pkg, version] of installs) assert.equal(version, pinned.get(pkg), `docs/clients-protos.md: go install ${pkg}@${version}; infra/tools.sh pins ${pinned.get(pkg)}`);

    const requirements = readFileSync(join(ROOT, "infra", "proto-python.requirements.txt"), "utf8");
    const pins = new Map([...requirements.matchAll(/^([\w-]+)==(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    const named = [...readDoc(README_TESTS["python-codegen"].doc).matchAll(/\b(grpcio-tools|grpcio)==(\S+)/g)];
    assert.ok(named.length >= 2, "docs/clients-protos.md pins grpcio-tools and grpcio");
    for (const [, pkg, version] of named) assert.equal(version, pins.get(pkg!), `docs/clients-protos.md: ${pkg}==${version}; infra/proto-python.requirements.txt pins ${pins.get(pkg!)}`);
  });

  it("when the proto files are read, then each declares the options Go, Java, C#, PHP, Ruby and Objective-C generation need", () => {
    for (const file of OUR_FILES) {
      const options = file.proto.options;
      const name = file.proto.name;
      assert.equal(options?.goPackage, `${GO_MODULE}/generation/v1;generationv1`, name);
      assert.equal(options?.javaPackage, "com.example.generation.v1", name);
      assert.equal(options?.javaMultipleFiles, true, name);
      const stem = name.replace(/^.*\//, "").replace(/\.proto$/, "");
      assert.equal(options?.javaOuterClassname, `${stem.split("_").map((w) => w[0]!.toUpperCase() + w.slice(1)).join("")}Proto`, name);
      assert.equal(options?.csharpNamespace, "Generation.V1", name);
      assert.equal(options?.phpNamespace, "Generation\\V1", name);
      assert.equal(options?.rubyPackage, "Generation::V1", name);
      assert.equal(options?.objcClassPrefix, "GXX", name);
    }
  });

  it("when Go code is generated with protoc-gen-go, -go-grpc and -connect-go, then go build and go vet pass and both clients call the core", async () => {
    const plugins = ["protoc-gen-go", "protoc-gen-go-grpc", "protoc-gen-connect-go"].map(goTool);
    const command = readmeBlock("go-codegen");
    assert.ok(command.body.includes(GO_TEMPLATE), `the go-codegen command of docs/clients-protos.md uses ${GO_TEMPLATE}: ${command.body}`);
    writeFileSync(join(work, GO_TEMPLATE), readmeBlock("go-codegen-template").body + "\n");
    // The plugins on PATH, as `go install` leaves them for a reader whose PATH has $(go env GOPATH)/bin.
    const env = readerEnvironment({ PATH: [...new Set(plugins.map((plugin) => dirname(plugin))), process.env.PATH ?? ""].join(delimiter), npm_config_update_notifier: "false" });
    await runBlockOk("go-codegen", command, { cwd: work, env, timeoutMs: 60_000 });
    // Where the template's `out:` put it.
    const out = join(work, /^\s*out: (\S+)$/m.exec(readmeBlock("go-codegen-template").body)![1]!);
    const generated = files(out).map((file) => relative(out, file)).sort();
    for (const file of OUR_FILES) {
      const stem = file.proto.name.replace(/\.proto$/, "");
      assert.ok(generated.includes(`${stem}.pb.go`), `${stem}.pb.go in ${generated.join(", ")}`);
    }
    for (const stem of ["admin_service", "file_service", "generation_service", "text_service"]) {
      assert.ok(generated.includes(`generation/v1/${stem}_grpc.pb.go`), stem);
      assert.ok(generated.includes(`generation/v1/generationv1connect/${stem}.connect.go`), stem);
    }

    writeFileSync(
      join(out, "go.mod"),
      [`module ${GO_MODULE}`, "", "go 1.25", "", "require (", ...Object.entries(GO_REQUIRES).map(([m, v]) => `\t${m} ${v}`), ")", ""].join("\n"),
    );
    mkdirSync(join(out, "cmd", "check"), { recursive: true });
    writeFileSync(join(out, "cmd", "check", "main.go"), GO_CHECK);
    const go = { cwd: out, timeoutMs: 240_000, env: { ...process.env, GOFLAGS: "-mod=mod -buildvcs=false" } };
    ok(await runTool("go", ["mod", "tidy"], go), "go mod tidy");
    ok(await runTool("go", ["build", "./..."], go), "go build");
    ok(await runTool("go", ["vet", "./..."], go), "go vet");
    ok(await runTool("go", ["build", "-o", join(work, "check"), "./cmd/check"], go), "go build ./cmd/check");

    const called = ok(await runTool(join(work, "check"), [grpcAddress(service.grpcUrl)]), "the Go clients");
    const [viaGrpc, viaConnect, firstId] = called.trim().split(" ");
    assert.ok(Number(viaGrpc) > 0, called);
    assert.equal(viaConnect, viaGrpc, "grpc-go and connect-go see the same models");
    assert.match(firstId ?? "", /^aimodel-/);
  });

  it("when Python code is generated with grpcio-tools, then every module imports and a grpcio stub calls the core", async () => {
    try {
      accessSync(PROTO_PYTHON, constants.X_OK);
    } catch {
      assert.fail(`${PROTO_PYTHON} not found: run \`bash infra/tools.sh\` to install grpcio-tools`);
    }
    // The venv of infra/tools.sh, activated as `. .venv/bin/activate` would: its python first on PATH.
    const env = readerEnvironment({ PATH: [PROTO_PYTHON_BIN, process.env.PATH ?? ""].join(delimiter), VIRTUAL_ENV: dirname(PROTO_PYTHON_BIN) });
    const command = readmeBlock("python-codegen");
    await runBlockOk("python-codegen", command, { cwd: work, env, timeoutMs: 60_000 });
    const out = join(work, /--python_out=(\S+)/.exec(command.body)![1]!);
    const generated = files(out).map((file) => relative(out, file));
    for (const stem of ["generation_service", "text_service", "admin_service", "file_service"]) {
      for (const suffix of ["_pb2.py", "_pb2.pyi", "_pb2_grpc.py"]) assert.ok(generated.includes(`generation/v1/${stem}${suffix}`), `${stem}${suffix}`);
    }
    const called = ok(await runTool(PROTO_PYTHON, ["-c", PYTHON_CHECK, out, grpcAddress(service.grpcUrl)], { timeoutMs: 30_000 }), "the Python client");
    const [methods, count, firstId] = called.trim().split(" ");
    assert.deepEqual(methods!.split(","), GenerationService.methods.map((method) => method.name).sort());
    assert.ok(Number(count) > 0, called);
    assert.match(firstId ?? "", /^aimodel-/);
  });
});
