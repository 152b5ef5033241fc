/** See build-state.mjs. */
export function buildState(root?: string): "missing" | "stale" | "current";
