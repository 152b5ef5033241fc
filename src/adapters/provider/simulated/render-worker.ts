import { parentPort } from "node:worker_threads";
import { renderMp4, type RenderMp4Options } from "./render-mp4.js";
import { renderPng } from "./render-png.js";

export type RenderJob =
  | { readonly id: number; readonly kind: "png"; readonly options: { width: number; height: number; seed: string } }
  | { readonly id: number; readonly kind: "mp4"; readonly options: RenderMp4Options };

export type RenderResult = { readonly id: number; readonly bytes: Uint8Array } | { readonly id: number; readonly error: string };

/**
 * Renders off the service's event loop. The bytes travel back as a copy, not transferred: the service's
 * thread frees a copy at its next young collection, while a transferred buffer stays until a full one
 * (V8 let about 60 MB of finished PNGs pile up in the service that way).
 */
parentPort?.on("message", async (job: RenderJob) => {
  try {
    const rendered = job.kind === "png" ? renderPng(job.options) : await renderMp4(job.options);
    parentPort!.postMessage({ id: job.id, bytes: rendered } satisfies RenderResult);
  } catch (error) {
    parentPort!.postMessage({ id: job.id, error: (error as Error).message } satisfies RenderResult);
  }
});
