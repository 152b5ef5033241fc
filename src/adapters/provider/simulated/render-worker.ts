import { parentPort } from "node:worker_threads";
import { renderMp4, type RenderMp4Options } from "./render-mp4.js";
import { renderPng } from "./render-png.js";

export type RenderJob =
  | { readonly id: number; readonly kind: "png"; readonly options: { width: number; height: number; seed: string } }
  | { readonly id: number; readonly kind: "mp4"; readonly options: RenderMp4Options };

export type RenderResult = { readonly id: number; readonly bytes: Uint8Array } | { readonly id: number; readonly error: string };

/** Renders off the service's event loop; the bytes travel back without a copy. */
parentPort?.on("message", async (job: RenderJob) => {
  try {
    const rendered = job.kind === "png" ? renderPng(job.options) : await renderMp4(job.options);
    const bytes = new Uint8Array(rendered); // its own buffer, so it can be transferred
    parentPort!.postMessage({ id: job.id, bytes } satisfies RenderResult, [bytes.buffer]);
  } catch (error) {
    parentPort!.postMessage({ id: job.id, error: (error as Error).message } satisfies RenderResult);
  }
});
