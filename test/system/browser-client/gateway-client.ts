/**
 * The browser side of test/system/connect-web.test.ts, bundled by esbuild
 * and run in Chromium: a Connect-Web client, exactly as a web app writes it
 * (the generated service descriptors, @connectrpc/connect-web's transports),
 * against the gateway port on another origin. Its functions are put on
 * globalThis for the test to call through page.evaluate.
 */
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { ErrorDetailSchema, GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { JobStatus } from "../../../gen/generation/v1/job_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";

export type Protocol = "connect" | "grpc-web";

export interface Target {
  readonly baseUrl: string;
  readonly protocol: Protocol;
  readonly apiKey: string;
}

/** What a call that failed looked like to the page. */
export interface Failure {
  readonly code: string;
  readonly message: string;
  readonly reason: string | undefined;
  readonly httpStatus: number | undefined;
}

export interface JourneyResult {
  readonly balance: string;
  readonly jobId: string;
  readonly replayed: boolean;
  readonly finalStatus: string;
  readonly polls: number;
  readonly imageUrl: string;
  readonly streamedMessages: number;
  readonly streamedText: string;
  readonly balanceAfter: string;
}

function transportOf(target: Pick<Target, "baseUrl" | "protocol">): Transport {
  return target.protocol === "connect" ? createConnectTransport({ baseUrl: target.baseUrl }) : createGrpcWebTransport({ baseUrl: target.baseUrl });
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

function failureOf(error: unknown): Failure {
  const connectError = ConnectError.from(error);
  const [detail] = connectError.findDetails(ErrorDetailSchema);
  return { code: Code[connectError.code]!, message: connectError.rawMessage, reason: detail?.reason, httpStatus: detail?.httpStatus };
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The balance, a job created (and replayed by its idempotency key), polled until finished, then streamed text. */
async function journey(target: Target): Promise<JourneyResult> {
  const transport = transportOf(target);
  const generation = createClient(GenerationService, transport);
  const text = createClient(TextService, transport);
  const headers = bearer(target.apiKey);

  const balance = await generation.getBalance({}, { headers });
  const request = { model: "aimodel-3-pro-image", prompt: `a lighthouse at dusk (${target.protocol})`, aspectRatio: "16:9", resolution: "1K", idempotencyKey: `browser-${target.protocol}` };
  const created = await generation.createGeneration(request, { headers });
  const replayed = await generation.createGeneration(request, { headers });

  // Polled as an app polls, against a deadline.
  const deadline = Date.now() + 20_000;
  let polls = 0;
  let job = (await generation.getJob({ jobId: created.jobId }, { headers })).job;
  while (job?.status !== JobStatus.DONE && job?.status !== JobStatus.FAILED && Date.now() < deadline) {
    await pause(50);
    polls++;
    job = (await generation.getJob({ jobId: created.jobId }, { headers })).job;
  }

  let streamedMessages = 0;
  let streamedText = "";
  for await (const message of text.streamGenerateContent(
    { request: { model: "aimodel-3.5-flash", contents: [{ role: "user", parts: [{ data: { case: "text", value: "Write a haiku about tides" } }] }] } },
    { headers },
  )) {
    streamedMessages++;
    for (const part of message.chunk?.candidates[0]?.content?.parts ?? []) if (part.data.case === "text") streamedText += part.data.value;
  }
  const after = await generation.getBalance({}, { headers });

  return {
    balance: balance.balance?.available ?? "",
    jobId: created.jobId,
    replayed: replayed.replayed && replayed.jobId === created.jobId,
    finalStatus: JobStatus[job?.status ?? JobStatus.UNSPECIFIED]!,
    polls,
    imageUrl: job?.result?.imageUrl ?? "",
    streamedMessages,
    streamedText,
    balanceAfter: after.balance?.available ?? "",
  };
}

/** One GetBalance; a failure is returned as the page saw it. */
async function balanceOrFailure(target: Target): Promise<{ readonly available: string } | { readonly failure: Failure }> {
  try {
    const answer = await createClient(GenerationService, transportOf(target)).getBalance({}, { headers: bearer(target.apiKey) });
    return { available: answer.balance?.available ?? "" };
  } catch (error) {
    return { failure: failureOf(error) };
  }
}

/** One CreateGeneration that must fail (a refused origin); its failure as the page saw it. */
async function createFailure(target: Target): Promise<Failure | undefined> {
  try {
    await createClient(GenerationService, transportOf(target)).createGeneration(
      { model: "aimodel-3-pro-image", prompt: "never accepted", resolution: "1K" }, { headers: bearer(target.apiKey) },
    );
    return undefined;
  } catch (error) {
    return failureOf(error);
  }
}

/** The REST surface from the page: a job created twice with one Idempotency-Key; the headers the page can read. */
async function restReplay(baseUrl: string, apiKey: string) {
  const post = () =>
    fetch(`${baseUrl}/api/v1/generations`, {
      method: "POST",
      headers: { ...bearer(apiKey), "content-type": "application/json", "idempotency-key": "browser-rest" },
      body: JSON.stringify({ model: "aimodel-3-pro-image", prompt: "a fox in the snow", resolution: "1K" }),
    });
  const first = await post();
  const second = await post();
  return {
    statuses: [first.status, second.status],
    replayed: second.headers.get("idempotent-replayed"),
    location: second.headers.get("location"),
  };
}

(globalThis as unknown as { gatewayClient: unknown }).gatewayClient = { journey, balanceOrFailure, createFailure, restReplay };
