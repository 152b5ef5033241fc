// backends: embedded
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { formatMoney, parseMoney } from "../../src/domain/money.js";
import { call } from "../support/harness.js";
import { goTool } from "../support/go-tools.js";
import { probePng } from "../support/media-probe.js";
import { readerEnvironment, readmeBlock, readReadme, ROOT } from "../support/readme-blocks.js";
import { startReadmeService, type ReadmeService } from "../support/readme-service.js";
import { commandsOf, jsonObjectsIn, readWalkthrough, runWalkthrough, type WalkthroughRun } from "../support/readme-walkthrough.js";

/**
 * The README's walk-through, every command exactly as written: its `npm start`
 * (test/support/readme-service.ts: in the background, its own process group,
 * on 8080 and 8081, until /readyz answers 200), then every other ```sh block
 * between its markers, the exports first, in one bash, and after them the
 * grpc-reflection block of docs/clients.md, in the same bash, with the key
 * the walk-through made. The shell is a reader's: none of the service's
 * variables set, grpcurl (`npm run tools`) on PATH.
 */

/** The shell variables the walk-through leaves behind (named in its start marker): its key and its job. */
const CARRIED = ["KEY", "JOB"] as const;
// Below these the walk-through has lost steps (today: 7 blocks, 24 commands).
const MIN_BLOCKS = 6;
const MIN_COMMANDS = 15;
/** What grpcurl `list` must show (docs/clients.md "gRPC reflection"). */
const SERVED_SERVICES = [
  "generation.v1.AccountService",
  "generation.v1.AdminService",
  "generation.v1.FileService",
  "generation.v1.GenerationService",
  "generation.v1.TextService",
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
];

interface BalanceJson { balance: string; reserved: string; available: string; currency: string }
const isBalance = (value: unknown): value is BalanceJson =>
  typeof value === "object" && value !== null && ["balance", "reserved", "available", "currency"].every((k) => k in value);

/** Why the run failed, with the block and its output: the message names the README command that broke. */
function failure(run: WalkthroughRun, blocks: readonly string[], service: ReadmeService | undefined): string {
  const failed = run.outputs.length - 1;
  return [
    `the walk-through exited ${run.exitCode} in block ${failed + 1} of ${blocks.length}:`,
    blocks[failed] ?? "(before the first block)",
    "--- its output ---",
    run.outputs[failed] ?? "",
    "--- stderr ---",
    run.stderr,
    "--- the service's output ---",
    service?.output() ?? "(not started)",
  ].join("\n");
}

describe("README walk-through", () => {
  it("when the README is read, then its walk-through is found between its markers, started by npm start, exporting BASE_URL and ADMIN_TOKEN first, with enough commands to run", () => {
    const { start, run } = readWalkthrough(readReadme());
    assert.match(start.body, /\bnpm start\b/, "the start-service block starts the service with npm start");
    assert.equal(run[0], readmeBlock("reader-env").body, "the first block run is the one that exports BASE_URL and ADMIN_TOKEN");
    assert.deepEqual(commandsOf(run[0]!).map((c) => /^export (\w+)=/.exec(c)?.[1]), ["BASE_URL", "ADMIN_TOKEN"]);
    assert.ok(run.length >= MIN_BLOCKS, `expected at least ${MIN_BLOCKS} sh blocks in the walk-through, found ${run.length}`);
    const commands = run.flatMap(commandsOf);
    assert.ok(commands.length >= MIN_COMMANDS, `expected at least ${MIN_COMMANDS} commands in the walk-through, found ${commands.length}`);
  });

  describe("when the README's npm start is running and every command of the walk-through, then the reflection commands, are run as written, in order, in one bash", () => {
    let service: ReadmeService | undefined;
    let workDir: string;
    let blocks: readonly string[];
    /** How many of `blocks` are the walk-through's (the reflection block comes after them). */
    let walkthroughBlocks: number;
    let run: WalkthroughRun;
    before(async () => {
      const markdown = readReadme();
      const walkthrough = readWalkthrough(markdown).run;
      walkthroughBlocks = walkthrough.length;
      blocks = [...walkthrough, readmeBlock("grpc-reflection").body];
      service = await startReadmeService();
      // The reader's working directory, where the commands' files go; `npx buf` finds this checkout's buf through node_modules.
      workDir = await mkdtemp(join(tmpdir(), "readme-walkthrough-"));
      await symlink(join(ROOT, "node_modules"), join(workDir, "node_modules"), "dir");
      // A reader's shell: the service's variables unset (the walk-through exports its own), grpcurl installed.
      const env = readerEnvironment({ PATH: [dirname(goTool("grpcurl")), process.env.PATH ?? ""].join(delimiter), npm_config_update_notifier: "false" });
      run = await runWalkthrough(blocks, { env, cwd: workDir, readVars: CARRIED, timeoutMs: 120_000 });
    });
    after(async () => {
      try {
        await service?.stop();
      } finally {
        if (workDir) await rm(workDir, { recursive: true, force: true });
      }
    });

    /** The walk-through's own output, without the reflection block's. */
    const walkthroughOutput = () => run.outputs.slice(0, walkthroughBlocks).join("\n");

    it("then every block exits 0", () => {
      assert.equal(run.exitCode, 0, failure(run, blocks, service));
      assert.equal(run.outputs.length, blocks.length, "every block ran");
      for (const name of CARRIED) assert.ok(run.vars[name], `$${name} is set after the last block`);
    });

    it("then the job it created is done, and the file it downloaded is the job's image, a whole PNG", async () => {
      assert.equal(run.exitCode, 0, failure(run, blocks, service));
      const job = await call(service!, "GET", `/api/v1/jobs/${run.vars.JOB}`, { key: run.vars.KEY });
      assert.equal(job.status, 200, job.text);
      assert.equal(job.json.status, "done");

      const written = await readdir(workDir);
      const pngs = written.filter((name) => name.endsWith(".png"));
      assert.equal(pngs.length, 1, `one PNG downloaded; the working directory holds ${JSON.stringify(written)}`);
      const downloaded = new Uint8Array(await readFile(join(workDir, pngs[0]!)));
      const { width, height } = probePng(downloaded);
      const served = new Uint8Array(await (await fetch(job.json.result.image_url)).arrayBuffer());
      assert.deepEqual(probePng(served), { width, height });
      assert.ok(Buffer.from(downloaded).equals(Buffer.from(served)), "the downloaded file is byte for byte the job's result");
    });

    it("then the balance it printed after the job is the balance it printed before, minus exactly the job's charge, with nothing left reserved", async () => {
      assert.equal(run.exitCode, 0, failure(run, blocks, service));
      const job = (await call(service!, "GET", `/api/v1/jobs/${run.vars.JOB}`, { key: run.vars.KEY })).json;
      const charged = parseMoney(job.usage.charged);
      assert.ok(charged > 0n, `the job was charged (usage.charged ${job.usage.charged})`);
      assert.equal(job.usage.charged, job.usage.reserved, "an image is charged exactly the price it reserved");
      // The published price of that model: one of its per-image prices.
      const models = (await call(service!, "GET", "/api/v1/models")).json.models as { id: string; price: { per_image: Record<string, string> } }[];
      const perImage = Object.values(models.find((m) => m.id === job.model)!.price.per_image);
      assert.ok(perImage.includes(job.usage.charged), `${job.usage.charged} is one of ${job.model}'s prices ${JSON.stringify(perImage)}`);

      const balances = jsonObjectsIn(walkthroughOutput()).filter(isBalance);
      assert.ok(balances.length >= 2, `the walk-through prints the balance before and after the job; found ${balances.length}`);
      const [first, last] = [balances[0]!, balances.at(-1)!];
      assert.equal(first.reserved, "0.00");
      assert.equal(last.balance, formatMoney(parseMoney(first.balance) - charged), "balance after = balance before − usage.charged (exact decimals)");
      assert.equal(last.reserved, "0.00", "nothing is still reserved once the job is done");
      assert.equal(last.available, last.balance);
    });

    it("then the retry with the same Idempotency-Key was answered as a replay of the same job", () => {
      assert.equal(run.exitCode, 0, failure(run, blocks, service));
      assert.match(walkthroughOutput(), /^idempotent-replayed: true\r?$/im);
      const accepted = jsonObjectsIn(walkthroughOutput()).filter((o): o is { job_id: string; status_url: string } =>
        typeof o === "object" && o !== null && "status_url" in o);
      assert.ok(accepted.length >= 1, "the replayed 202 body is printed");
      for (const body of accepted) assert.equal(body.job_id, run.vars.JOB);
    });

    it("then the synchronous text calls printed a JSON answer and an SSE stream of the same answer, whose last event carries its final usage", () => {
      assert.equal(run.exitCode, 0, failure(run, blocks, service));
      const output = walkthroughOutput();
      const answers = jsonObjectsIn(output.replace(/^data: .*$/gm, ""))
        .filter((o): o is { usageMetadata: { totalTokenCount: number } } => typeof o === "object" && o !== null && "candidates" in o);
      assert.equal(answers.length, 1, "one generateContent answer is printed");
      const events = output.split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice("data: ".length)));
      assert.ok(events.length >= 2, `the stream printed several events as they came, found ${events.length}`);
      const last = events.at(-1);
      assert.equal(last.candidates[0].finishReason, "STOP");
      // The simulated provider answers a prompt deterministically: the stream ends with the unary answer's usage.
      assert.ok(answers[0]!.usageMetadata.totalTokenCount > 0);
      assert.deepEqual(last.usageMetadata, answers[0]!.usageMetadata);
    });

    it("then the web panel the README names is served at /panel/ by that same npm start (the compiled build)", async () => {
      const page = await call(service!, "GET", "/panel/");
      assert.equal(page.status, 200, page.text);
      assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
      const script = /<script[^>]+src="([^"]+)"/.exec(page.text)?.[1];
      assert.ok(script, `the page loads its script: ${page.text.slice(0, 300)}`);
      const asset = await call(service!, "GET", new URL(script, `${service!.url}/panel/`).pathname);
      assert.equal(asset.status, 200, `${script}: ${asset.text.slice(0, 200)}`);
    });

    it("then the reflection commands listed every served service, described GenerationService, read the walk-through's balance over gRPC and listed the models REST lists", async () => {
      assert.equal(run.exitCode, 0, failure(run, blocks, service));
      const output = run.outputs.at(-1)!;
      const listed = output.split("\n").filter((line) => /^[a-z]+(\.[a-z0-9]+)*\.[A-Z]\w*$/.test(line));
      assert.deepEqual(listed.sort(), SERVED_SERVICES, `grpcurl list:\n${output}`);
      assert.match(output, /^generation\.v1\.GenerationService is a service:$/m);
      assert.match(output, /^\s*rpc CreateGeneration \( \.generation\.v1\.CreateGenerationRequest \) returns \( \.generation\.v1\.CreateGenerationResponse \);$/m);

      const printed = jsonObjectsIn(output);
      const viaGrpc = printed.find((o): o is { balance: BalanceJson } => typeof o === "object" && o !== null && "balance" in o);
      const { balance, reserved, available, currency } = (await call(service!, "GET", "/api/v1/balance", { key: run.vars.KEY })).json as BalanceJson;
      const viaRest = { balance, reserved, available, currency }; // REST adds the low-balance fields beside them
      assert.deepEqual(viaGrpc?.balance, viaRest, "GetBalance over gRPC is the balance REST shows");

      const listedModels = printed.find((o): o is { models: { id: string }[] } => typeof o === "object" && o !== null && "models" in o);
      const restModels = (await call(service!, "GET", "/api/v1/models")).json.models as { id: string }[];
      assert.deepEqual(listedModels?.models.map((m) => m.id), restModels.map((m) => m.id), "buf curl ListModels: the catalog REST lists, in order");
    });
  });
});
