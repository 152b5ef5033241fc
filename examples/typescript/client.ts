/**
 * A tiny client of the generation service, written against the TypeScript
 * code generated from proto/ (gen/, protobuf-es v2) and Connect-ES v2 over
 * HTTP/2 without TLS (the core port speaks h2c).
 *
 * Configuration, from the environment only:
 *   GENERATION_ADDRESS  the core port, "host:port" or "http://host:port" (for example 127.0.0.1:8081)
 *   GENERATION_API_KEY  an API key of your account
 *
 * It creates an image job, polls it until it is done or failed, reads the
 * balance, and streams a text answer. It exits with 1 on any failure, 2 when
 * misconfigured.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema, GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import { JobStatus, type Job } from "../../gen/generation/v1/job_pb.js";
import { TextService } from "../../gen/generation/v1/text_service_pb.js";

const IMAGE_MODEL = "aimodel-3-pro-image";
const TEXT_MODEL = "aimodel-3.5-flash";
const TEXT_PROMPT = "Write a haiku about tides";
/** How long the job may take before this client gives up. */
const JOB_DEADLINE_MS = 120_000;
const POLL_INTERVAL_MS = 250;

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is not set (GENERATION_ADDRESS=host:port of the core, GENERATION_API_KEY=your key)`);
    process.exit(2);
  }
  return value;
}

/** "queued", "processing", "done", "failed". */
function statusName(status: JobStatus): string {
  return (JobStatus[status] ?? String(status)).toLowerCase();
}

async function main(): Promise<void> {
  const address = required("GENERATION_ADDRESS");
  const apiKey = required("GENERATION_API_KEY");
  const baseUrl = address.includes("://") ? address : `http://${address}`;

  // Every call carries the key; the service reads it from `authorization: Bearer`.
  const withKey: Interceptor = (next) => (request) => {
    request.header.set("authorization", `Bearer ${apiKey}`);
    return next(request);
  };
  const transport = createConnectTransport({ baseUrl, httpVersion: "2", interceptors: [withKey] });
  const generation = createClient(GenerationService, transport);
  const text = createClient(TextService, transport);
  console.log(`service: ${baseUrl} (Connect over HTTP/2)`);

  // 1. An image job. The idempotency key makes a retry of this call safe.
  const created = await generation.createGeneration({
    model: IMAGE_MODEL,
    prompt: "a lighthouse at dusk",
    aspectRatio: "1:1",
    resolution: "1K",
    idempotencyKey: randomUUID(),
  });
  console.log(`created image job ${created.jobId} (${IMAGE_MODEL}, 1:1, 1K): ${statusName(created.status)}`);

  // 2. Poll until it is finished, printing each change of status.
  let job: Job | undefined;
  let last = created.status;
  const deadline = Date.now() + JOB_DEADLINE_MS;
  for (;;) {
    job = (await generation.getJob({ jobId: created.jobId })).job;
    if (!job) throw new Error("GetJob answered without a job");
    if (job.status === JobStatus.DONE || job.status === JobStatus.FAILED) break;
    if (job.status !== last) console.log(`job ${job.jobId}: ${statusName(job.status)}`);
    last = job.status;
    if (Date.now() > deadline) throw new Error(`job ${job.jobId} still ${statusName(job.status)} after ${JOB_DEADLINE_MS} ms`);
    await sleep(POLL_INTERVAL_MS);
  }
  if (job.status === JobStatus.FAILED) throw new Error(`job ${job.jobId}: failed, ${job.error ?? "?"}: ${job.errorMessage ?? ""}`);
  console.log(`job ${job.jobId}: done, charged ${job.usage?.charged} USD, ${job.result?.mimeType} at ${job.result?.imageUrl}`);

  // 3. The balance, now that the job is settled.
  const balance = (await generation.getBalance({})).balance;
  if (!balance) throw new Error("GetBalance answered without a balance");
  console.log(`balance: ${balance.balance} ${balance.currency} (reserved ${balance.reserved}, available ${balance.available})`);

  // 4. A streamed text answer, printed as it arrives; the last chunk carries the charged usage.
  console.log(`streaming ${TEXT_MODEL}: "${TEXT_PROMPT}"`);
  let chunks = 0;
  let promptTokens = 0;
  let outputTokens = 0;
  const stream = text.streamGenerateContent({
    request: { model: TEXT_MODEL, contents: [{ role: "user", parts: [{ data: { case: "text", value: TEXT_PROMPT } }] }] },
  });
  for await (const { chunk } of stream) {
    chunks++;
    for (const part of chunk?.candidates[0]?.content?.parts ?? []) {
      if (part.data.case === "text" && !part.thought) process.stdout.write(part.data.value);
    }
    promptTokens = chunk?.usageMetadata?.promptTokenCount ?? promptTokens;
    outputTokens = chunk?.usageMetadata?.candidatesTokenCount ?? outputTokens;
  }
  process.stdout.write("\n");
  console.log(`streamed ${chunks} chunks; usage: ${promptTokens} prompt + ${outputTokens} output tokens`);
}

main().catch((error: unknown) => {
  if (error instanceof ConnectError) {
    // The service attaches an ErrorDetail with a stable reason to every error.
    const reason = error.findDetails(ErrorDetailSchema)[0]?.reason;
    console.error(`failed: ${Code[error.code]} ${error.rawMessage}${reason ? ` (reason ${reason})` : ""}`);
  } else {
    console.error(`failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  process.exit(1);
});
