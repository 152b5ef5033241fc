// `npm start`: the service as compiled by `npm run build` (which `npm ci` runs, through `prepare`), in this
// process: no TypeScript loader in memory. A build older than its sources is refused, not run.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const STAMP = "dist/.built";

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

function refuse(reason) {
  process.stderr.write(`${reason}: run \`npm run build\` first (or \`npm run dev\` to run the sources with tsx)\n`);
  process.exit(1);
}

if (!existsSync(STAMP)) refuse("there is no build in dist/");
if (Math.max(newest("src"), newest("gen")) > statSync(STAMP).mtimeMs) refuse("src/ or gen/ changed since the last build");
await import("../dist/src/main.js");
