import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { eventually } from "./harness.js";

export interface Delivery {
  readonly at: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly json: any;
  /** The status the receiver answered; undefined when it never answered ("hang"). */
  readonly answered?: number;
}

/** What the receiver does with a request: answer with a status, or never answer. */
export type Answer = number | "hang";

/** A webhook endpoint on loopback that records every raw delivery. */
export class Receiver {
  readonly deliveries: Delivery[] = [];
  readonly startedAt = Date.now();
  private server: Server | undefined;
  url = "";

  constructor(private readonly answer: (delivery: Omit<Delivery, "answered">, attemptForJob: number) => Answer = () => 200) {}

  async start(): Promise<this> {
    this.server = createServer((request: IncomingMessage, response: ServerResponse) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        let json: any;
        try {
          json = JSON.parse(body);
        } catch {
          json = undefined;
        }
        const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, String(v)]));
        const received = { at: Date.now(), headers, body, json };
        const answer = this.answer(received, this.forJob(json?.job_id).length + 1);
        this.deliveries.push({ ...received, answered: answer === "hang" ? undefined : answer });
        if (answer === "hang") return;
        response.writeHead(answer, { "content-type": "text/plain" }).end("ok");
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
    return this;
  }

  forJob(jobId: string): Delivery[] {
    return this.deliveries.filter((d) => d.json?.job_id === jobId);
  }

  /** Waits until `count` deliveries for the job have arrived. */
  async awaitJob(jobId: string, count = 1): Promise<Delivery[]> {
    return eventually(async () => this.forJob(jobId), (list) => list.length >= count, {
      timeoutMs: 10_000, what: `${count} webhook deliveries for job ${jobId}`,
    });
  }

  /** Polls until nothing has arrived for `ms` (measured from the last delivery, or from `since`). */
  async quietFor(ms: number, since = this.startedAt): Promise<void> {
    await eventually(
      async () => Date.now() - Math.max(since, ...this.deliveries.map((d) => d.at)),
      (idle) => idle >= ms,
      { timeoutMs: 15_000, intervalMs: 25, what: `${ms} ms without webhook deliveries` },
    );
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}

export async function withReceiver<T>(answer: ConstructorParameters<typeof Receiver>[0], work: (r: Receiver) => Promise<T>): Promise<T> {
  const receiver = await new Receiver(answer).start();
  try {
    return await work(receiver);
  } finally {
    await receiver.close();
  }
}

