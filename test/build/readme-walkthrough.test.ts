import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatMoney, parseMoney } from "../../src/domain/money.js";
import { ADMIN_TOKEN, call, startTestService, type TestService } from "../support/harness.js";
import { probePng } from "../support/media-probe.js";
import { commandsOf, exportedNames, jsonObjectsIn, readWalkthrough, runWalkthrough, type WalkthroughRun } from "../support/readme-walkthrough.js";

const README = new URL("../../README.md", import.meta.url);
/** What the test exports for its own service, in place of the README's `sh setup` blocks. */
const envFor = (baseUrl: string) => ({ BASE_URL: baseUrl, ADMIN_TOKEN });
/** The shell variables the walk-through leaves behind (named in its start marker): its key and its job. */
const CARRIED = ["KEY", "JOB"] as const;
// Below these the walk-through has lost steps (today: 7 blocks, 24 commands).
const MIN_BLOCKS = 6;
const MIN_COMMANDS = 15;

interface BalanceJson { balance: string; reserved: string; available: string; currency: string }
const isBalance = (value: unknown): value is BalanceJson =>
  typeof value === "object" && value !== null && ["balance", "reserved", "available", "currency"].every((k) => k in value);

/** Why the run failed, with the block and its output: the message names the README command that broke. */
function failure(run: WalkthroughRun, blocks: readonly string[]): string {
  const failed = run.outputs.length - 1;
  return [
    `the walk-through exited ${run.exitCode} in block ${failed + 1} of ${blocks.length}:`,
    blocks[failed] ?? "(before the first block)",
    "--- its output ---",
    run.outputs[failed] ?? "",
    "--- stderr ---",
    run.stderr,
  ].join("\n");
}

describe("README walk-through", () => {
  it("when the README is read, then its walk-through is found between its markers, with setup blocks that export exactly what the test sets and enough commands to run", async () => {
    const { setup, run } = readWalkthrough(await readFile(README, "utf8"));
    assert.ok(setup.some((block) => commandsOf(block).some((c) => /\bnpm start\b/.test(c))), "a setup block starts the service with npm start");
    assert.deepEqual(exportedNames(setup), Object.keys(envFor("")).sort(), "the setup exports exactly the variables the test sets for its service");
    assert.ok(run.length >= MIN_BLOCKS, `expected at least ${MIN_BLOCKS} sh blocks in the walk-through, found ${run.length}`);
    const commands = run.flatMap(commandsOf);
    assert.ok(commands.length >= MIN_COMMANDS, `expected at least ${MIN_COMMANDS} commands in the walk-through, found ${commands.length}`);
  });

  describe("when every command of the walk-through is run as written, in order, in one bash, against a live service", () => {
    let service: TestService;
    let workDir: string;
    let blocks: readonly string[];
    let run: WalkthroughRun;
    before(async () => {
      blocks = readWalkthrough(await readFile(README, "utf8")).run;
      service = await startTestService();
      workDir = await mkdtemp(join(tmpdir(), "readme-walkthrough-"));
      run = await runWalkthrough(blocks, { env: envFor(service.url), cwd: workDir, readVars: CARRIED, timeoutMs: 120_000 });
    });
    after(async () => {
      await service?.close();
      if (workDir) await rm(workDir, { recursive: true, force: true });
    });

    it("then every block exits 0", () => {
      assert.equal(run.exitCode, 0, failure(run, blocks));
      assert.equal(run.outputs.length, blocks.length, "every block ran");
      for (const name of CARRIED) assert.ok(run.vars[name], `$${name} is set after the last block`);
    });

    it("then the job it created is done, and the file it downloaded is the job's image, a whole PNG", async () => {
      assert.equal(run.exitCode, 0, failure(run, blocks));
      const job = await call(service, "GET", `/api/v1/jobs/${run.vars.JOB}`, { key: run.vars.KEY });
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
      assert.equal(run.exitCode, 0, failure(run, blocks));
      const job = (await call(service, "GET", `/api/v1/jobs/${run.vars.JOB}`, { key: run.vars.KEY })).json;
      const charged = parseMoney(job.usage.charged);
      assert.ok(charged > 0n, `the job was charged (usage.charged ${job.usage.charged})`);
      assert.equal(job.usage.charged, job.usage.reserved, "an image is charged exactly the price it reserved");
      // The published price of that model: one of its per-image prices.
      const models = (await call(service, "GET", "/api/v1/models")).json.models as { id: string; price: { per_image: Record<string, string> } }[];
      const perImage = Object.values(models.find((m) => m.id === job.model)!.price.per_image);
      assert.ok(perImage.includes(job.usage.charged), `${job.usage.charged} is one of ${job.model}'s prices ${JSON.stringify(perImage)}`);

      const balances = jsonObjectsIn(run.stdout.split("\n@@walkthrough-vars@@\n")[0]!).filter(isBalance);
      assert.ok(balances.length >= 2, `the walk-through prints the balance before and after the job; found ${balances.length}`);
      const [first, last] = [balances[0]!, balances.at(-1)!];
      assert.equal(first.reserved, "0.00");
      assert.equal(last.balance, formatMoney(parseMoney(first.balance) - charged), "balance after = balance before − usage.charged (exact decimals)");
      assert.equal(last.reserved, "0.00", "nothing is still reserved once the job is done");
      assert.equal(last.available, last.balance);
    });

    it("then the retry with the same Idempotency-Key was answered as a replay of the same job", () => {
      assert.equal(run.exitCode, 0, failure(run, blocks));
      assert.match(run.stdout, /^idempotent-replayed: true\r?$/im);
      const accepted = jsonObjectsIn(run.stdout).filter((o): o is { job_id: string; status_url: string } =>
        typeof o === "object" && o !== null && "status_url" in o);
      assert.ok(accepted.length >= 1, "the replayed 202 body is printed");
      for (const body of accepted) assert.equal(body.job_id, run.vars.JOB);
    });

    it("then the synchronous text calls printed a JSON answer and an SSE stream of the same answer, whose last event carries its final usage", () => {
      assert.equal(run.exitCode, 0, failure(run, blocks));
      const answers = jsonObjectsIn(run.stdout.replace(/^data: .*$/gm, ""))
        .filter((o): o is { usageMetadata: { totalTokenCount: number } } => typeof o === "object" && o !== null && "candidates" in o);
      assert.equal(answers.length, 1, "one generateContent answer is printed");
      const events = run.stdout.split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice("data: ".length)));
      assert.ok(events.length >= 2, `the stream printed several events as they came, found ${events.length}`);
      const last = events.at(-1);
      assert.equal(last.candidates[0].finishReason, "STOP");
      // The simulated provider answers a prompt deterministically: the stream ends with the unary answer's usage.
      assert.ok(answers[0]!.usageMetadata.totalTokenCount > 0);
      assert.deepEqual(last.usageMetadata, answers[0]!.usageMetadata);
    });
  });
});
