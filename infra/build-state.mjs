// Whether dist/ (npm run build) is the build of the sources as they are: "missing", "stale" (src/ or gen/ changed
// since dist/.built was written) or "current". Read by infra/start.mjs and by the tests that run `npm start`.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** The newest modification time (ms) of any file under `dir`. */
export function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

export function buildState(root = ".") {
  const stamp = join(root, "dist", ".built");
  if (!existsSync(stamp)) return "missing";
  return Math.max(newest(join(root, "src")), newest(join(root, "gen"))) > statSync(stamp).mtimeMs ? "stale" : "current";
}
