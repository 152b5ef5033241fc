import { Worker } from "node:worker_threads";
import type { RenderMp4Options } from "./render-mp4.js";
import type { RenderJob, RenderResult } from "./render-worker.js";

/**
 * The thread's entry: compiled (`npm run build`, dist/), the worker module
 * itself; run by tsx from src/, a shim that registers tsx in the thread first
 * (worker threads do not inherit tsx's module hooks on Node 20).
 */
const RENDER_THREAD_ENTRY = import.meta.url.endsWith(".js") ? "./render-worker.js" : "./render-thread.mjs";

type Pending = { resolve: (bytes: Uint8Array) => void; reject: (error: Error) => void };

/**
 * Worker threads that render the simulator's PNGs and MP4s, so that a busy
 * simulator does not stall every request on the event loop (a 4K frame takes
 * hundreds of milliseconds of CPU). Jobs go to the thread with the fewest in
 * flight. Threads start as work needs them, up to `size`: a new one only
 * when every thread has work, so an idle process holds none (each is a V8
 * heap of its own) and a busy one uses them all.
 */
export class RenderPool {
  private readonly threads: { worker: Worker; pending: Map<number, Pending> }[] = [];
  private nextId = 0;
  private closed = false;

  constructor(private readonly size: number) {}

  private start(): { worker: Worker; pending: Map<number, Pending> } {
    // A small young generation: a render makes few JS objects, so with V8's default the thread seldom collects,
    // and the buffers zlib hands out per image (garbage once copied out) would pile up to V8's external limit.
    const worker = new Worker(new URL(RENDER_THREAD_ENTRY, import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: 1 } });
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
    return thread;
  }

  png(options: { width: number; height: number; seed: string }): Promise<Uint8Array> {
    return this.run({ id: this.nextId++, kind: "png", options });
  }

  mp4(options: RenderMp4Options): Promise<Uint8Array> {
    return this.run({ id: this.nextId++, kind: "mp4", options });
  }

  private run(job: RenderJob): Promise<Uint8Array> {
    // Closed: the process is stopping and no thread is started again. The job's lease lapses with it and the
    // next start resumes it; failing the render would fail the job instead (as a terminated thread never answers).
    if (this.closed) return new Promise<Uint8Array>(() => {});
    const least = this.threads.length > 0 ? this.threads.reduce((a, b) => (b.pending.size < a.pending.size ? b : a)) : undefined;
    const thread = least && (least.pending.size === 0 || this.threads.length >= this.size) ? least : this.start();
    return new Promise((resolve, reject) => {
      thread.pending.set(job.id, { resolve, reject });
      thread.worker.postMessage(job);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }
}
