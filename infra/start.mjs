// `npm start`: the service as compiled by `npm run build` (which `npm ci` runs, through `prepare`), in this
// process: no TypeScript loader in memory. A build older than its sources is refused, not run.
import { buildState } from "./build-state.mjs";

const state = buildState();
if (state !== "current") {
  const reason = state === "missing" ? "there is no build in dist/" : "src/ or gen/ changed since the last build";
  process.stderr.write(`${reason}: run \`npm run build\` first (or \`npm run dev\` to run the sources with tsx)\n`);
  process.exit(1);
}
await import("../dist/src/main.js");
