import { Worker } from "node:worker_threads";
import type { RenderMp4Options } from "./render-mp4.js";
import type { RenderJob, RenderResult } from "./render-worker.js";

type Pending = { resolve: (bytes: Uint8Array) => void; reject: (error: Error) => void };

/**
 * Worker threads that render the simulator's PNGs and MP4s, so that a busy
 * simulator does not stall every request on the event loop (a 4K frame takes
 * hundreds of milliseconds of CPU). Jobs go to the thread with the fewest in
 * flight.
 */
export class RenderPool {
  private readonly threads: { worker: Worker; pending: Map<number, Pending> }[] = [];
  private nextId = 0;

  constructor(size: number) {
    for (let i = 0; i < size; i++) {
      const worker = new Worker(new URL("./render-thread.mjs", import.meta.url));
      const thread = { worker, pending: new Map<number, Pending>() };
      worker.on("message", (result: RenderResult) => {
        const pending = thread.pending.get(result.id);
        thread.pending.delete(result.id);
        if ("error" in result) pending?.reject(new Error(result.error));
        else pending?.resolve(result.bytes);
      });
      worker.on("error", (error) => {
        for (const pending of thread.pending.values()) pending.reject(error);
        thread.pending.clear();
      });
      // An idle pool must not keep the process alive.
      worker.unref();
      this.threads.push(thread);
    }
  }

  png(options: { width: number; height: number; seed: string }): Promise<Uint8Array> {
    return this.run({ id: this.nextId++, kind: "png", options });
  }

  mp4(options: RenderMp4Options): Promise<Uint8Array> {
    return this.run({ id: this.nextId++, kind: "mp4", options });
  }

  private run(job: RenderJob): Promise<Uint8Array> {
    const thread = this.threads.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
    return new Promise((resolve, reject) => {
      thread.pending.set(job.id, { resolve, reject });
      thread.worker.postMessage(job);
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }
}
