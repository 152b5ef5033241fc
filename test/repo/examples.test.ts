// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { balanceOf, call, createCustomer, pico, startTestService, type TestService } from "../support/harness.js";
import { goTool, runTool, type ToolRun } from "../support/go-tools.js";
import { grpcAddress } from "../support/rpc-helpers.js";
import { REPO_ROOT } from "../support/repo.js";

/**
 * The example clients in examples/ (TypeScript with Connect, Python with
 * grpcio, Go with connect-go), generated, built and run with the very commands
 * their READMEs give (read from the READMEs, not copied), against a live
 * service, configured with nothing but GENERATION_ADDRESS and
 * GENERATION_API_KEY. Then the service's own state is checked: the job the
 * client printed exists and is done, and the balance moved by exactly the
 * job's price plus the streamed text's tokens.
 *
 * Tools: buf (npm), protoc-gen-go and protoc-gen-connect-go (Go), and the
 * grpcio-tools venv .infra/proto-python, all from `bash infra/tools.sh`.
 */

const ROOT = REPO_ROOT;
const PROTO_PYTHON_BIN = join(ROOT, ".infra", "proto-python", "bin");

const IMAGE_MODEL = "aimodel-3-pro-image";
const TEXT_MODEL = "aimodel-3.5-flash";
const TEXT_PROMPT = "Write a haiku about tides";
const START_BALANCE = "10.00";

type Step = "Generate" | "Build" | "Run";

interface Example {
  readonly language: string;
  readonly dir: string;
  /** The README sections whose ```sh block is run, in order, before Run. */
  readonly prepare: readonly Step[];
  /** How errors name the gRPC code (each library prints it its own way). */
  readonly unauthenticated: RegExp;
}

const EXAMPLES: readonly Example[] = [
  // gen/ is committed; regenerating it here would rewrite files other tests import
  // (test/repo/generated-code.test.ts checks it is exactly what `npm run generate` makes).
  { language: "TypeScript", dir: "typescript", prepare: ["Build"], unauthenticated: /^failed: Unauthenticated .*invalid/m },
  { language: "Python", dir: "python", prepare: ["Generate"], unauthenticated: /^failed: UNAUTHENTICATED .*invalid/m },
  { language: "Go", dir: "go", prepare: ["Generate", "Build"], unauthenticated: /^failed: unauthenticated .*invalid/m },
];

/** The first ```sh block under the README heading `## <section>`: the commands the README tells a reader to run. */
function readmeCommands(example: Example, section: Step): string {
  const readme = readFileSync(join(ROOT, "examples", example.dir, "README.md"), "utf8");
  const lines = readme.split("\n");
  const heading = lines.findIndex((line) => line.trim() === `## ${section}`);
  assert.ok(heading >= 0, `examples/${example.dir}/README.md has a "## ${section}" section`);
  const block: string[] = [];
  let inBlock = false;
  for (const line of lines.slice(heading + 1)) {
    if (!inBlock && line.startsWith("## ")) break;
    if (!inBlock && line.trim() === "```sh") inBlock = true;
    else if (inBlock && line.trim() === "```") return block.join("\n");
    else if (inBlock) block.push(line);
  }
  assert.fail(`examples/${example.dir}/README.md has no \`\`\`sh block under "## ${section}"`);
}

/**
 * The environment a reader has after the README's Install and Configure steps:
 * the Go generators on PATH, the Python venv active, the address and key exported.
 */
function readerEnv(configured: { address: string; apiKey: string }): NodeJS.ProcessEnv {
  const goBins = ["protoc-gen-go", "protoc-gen-connect-go"].map((plugin) => dirname(goTool(plugin)));
  return {
    ...process.env,
    PATH: [PROTO_PYTHON_BIN, ...new Set(goBins), process.env.PATH ?? ""].join(delimiter),
    VIRTUAL_ENV: dirname(PROTO_PYTHON_BIN),
    GENERATION_ADDRESS: configured.address,
    GENERATION_API_KEY: configured.apiKey,
  };
}

/** Runs one README block as a reader would paste it into bash, from the repository root. */
function runSection(example: Example, section: Step, env: NodeJS.ProcessEnv): Promise<ToolRun> {
  return runTool("bash", ["-euo", "pipefail", "-c", readmeCommands(example, section)], { cwd: ROOT, env, timeoutMs: 240_000 });
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

describe("the example clients in examples/, generated, built and run as their READMEs say", () => {
  let service: TestService;
  let address: string;
  let imagePrice: string;
  let textPrice: { input: string; output: string };
  /** Generation and build run once per example, whichever test needs them first. */
  const prepared = new Map<string, Promise<void>>();

  before(async () => {
    service = await startTestService();
    address = grpcAddress(service.grpcUrl);
    // The published prices: what the examples' calls must cost, to the last digit.
    const models = await call(service, "GET", "/api/v1/models");
    assert.equal(models.status, 200, models.text);
    const byId = new Map<string, any>(models.json.models.map((model: any) => [model.id, model]));
    imagePrice = byId.get(IMAGE_MODEL).price.per_image["1K"];
    textPrice = { input: byId.get(TEXT_MODEL).price.input_per_million_tokens, output: byId.get(TEXT_MODEL).price.output_per_million_tokens };
  });
  after(async () => {
    await service?.close();
  });

  function prepare(example: Example): Promise<void> {
    let done = prepared.get(example.dir);
    if (!done) {
      done = (async () => {
        // Generation and build need no account: any key will do.
        const env = readerEnv({ address, apiKey: "unused" });
        for (const section of example.prepare) ok(await runSection(example, section, env), `${example.language} ${section}`);
      })();
      prepared.set(example.dir, done);
    }
    return done;
  }

  it("when the Python example's requirements are read, then the venv it is run with holds exactly those pins", async () => {
    const pins = readFileSync(join(ROOT, "examples", "python", "requirements.txt"), "utf8")
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith("#"));
    assert.ok(pins.length >= 3, pins.join(", "));
    const names = pins.map((pin) => pin.split("==")[0]!);
    const script = "import sys, importlib.metadata as m; print('\\n'.join(f'{n}=={m.version(n)}' for n in sys.argv[1:]))";
    const installed = ok(await runTool(join(PROTO_PYTHON_BIN, "python"), ["-c", script, ...names]), "the venv's versions");
    assert.deepEqual(installed.trim().split("\n"), pins);
  });

  for (const example of EXAMPLES) {
    it(`when the ${example.language} example runs with an address and a key, then it creates an image job, polls it until done, reads the balance and streams text, and the service's state shows exactly that`, async () => {
      await prepare(example);
      const customer = await createCustomer(service, START_BALANCE);
      const env = readerEnv({ address, apiKey: customer.apiKey });
      const output = ok(await runSection(example, "Run", env), `${example.language} Run`);

      // What the client says it did.
      const [jobId] = match(output, new RegExp(`^created image job ([0-9a-f-]{36}) \\(${IMAGE_MODEL}, 1:1, 1K\\): queued$`, "m"));
      const [charged, imageUrl] = match(output, new RegExp(`^job ${jobId}: done, charged (\\S+) USD, image/png at (\\S+)$`, "m"));
      const [printedBalance, printedReserved, printedAvailable] = match(output, /^balance: (\S+) USD \(reserved (\S+), available (\S+)\)$/m);
      const [streamedText, chunks, promptTokens, outputTokens] = match(
        output,
        new RegExp(`^streaming ${TEXT_MODEL.replaceAll(".", "\\.")}: "${TEXT_PROMPT}"\\n(.+)\\nstreamed (\\d+) chunks; usage: (\\d+) prompt \\+ (\\d+) output tokens$`, "m"),
      );
      assert.match(streamedText!, new RegExp(`You asked: "${TEXT_PROMPT}"`), "the simulated answer quotes the prompt back");
      assert.ok(Number(chunks) >= 1 && Number(promptTokens) > 0 && Number(outputTokens) > 0, output);

      // The service's state: the job exists, is done, and cost its published price.
      const job = await call(service, "GET", `/api/v1/jobs/${jobId}`, { key: customer.apiKey });
      assert.equal(job.status, 200, job.text);
      assert.equal(job.json.status, "done");
      assert.equal(job.json.model, IMAGE_MODEL);
      assert.equal(pico(job.json.usage.charged), pico(imagePrice));
      assert.equal(pico(charged!), pico(imagePrice));
      const image = await fetch(imageUrl!);
      assert.equal(image.status, 200);
      assert.deepEqual([...new Uint8Array(await image.arrayBuffer()).subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], "the result is a PNG");

      // The balance the client read after the job moved by exactly the job's price.
      assert.equal(pico(printedBalance!), pico(START_BALANCE) - pico(imagePrice));
      assert.equal(pico(printedReserved!), 0n);
      assert.equal(pico(printedAvailable!), pico(printedBalance!));
      // Afterwards, only the streamed text's tokens have been charged on top.
      const textCostPerMillion = BigInt(promptTokens!) * pico(textPrice.input) + BigInt(outputTokens!) * pico(textPrice.output);
      assert.equal(textCostPerMillion % 1_000_000n, 0n, "prices per million tokens have at most 6 decimals: the cost is exact");
      const textCost = textCostPerMillion / 1_000_000n;
      const final = await balanceOf(service, customer.apiKey);
      assert.equal(pico(final.balance), pico(START_BALANCE) - pico(imagePrice) - textCost);
      assert.equal(pico(final.reserved), 0n);
    });

    it(`when the ${example.language} example runs with a key the service does not know, then it exits non-zero and says why`, async () => {
      await prepare(example);
      const run = await runSection(example, "Run", readerEnv({ address, apiKey: "gsk_not-a-key" }));
      assert.notEqual(run.code, 0, `exit code 0 with a wrong key:\n${run.stdout}`);
      assert.match(run.stderr, example.unauthenticated);
      assert.doesNotMatch(run.stdout, /created image job/);
    });
  }
});
