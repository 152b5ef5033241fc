// Entry of a render worker thread. Worker threads do not inherit tsx's module
// hooks on Node 20, so the worker registers them itself before loading the
// TypeScript worker module.
import { register } from "tsx/esm/api";

register();
await import("./render-worker.ts");
