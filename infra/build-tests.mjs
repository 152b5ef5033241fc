// `npm run build:tests`: the suite compiled, as `npm test` runs it. tsc type-checks src/, gen/, test/ and bench/
// (strict, as `npm run typecheck` does) and writes them as JavaScript under .test-build/, in the same layout; the
// files src/ reads at run time beside its modules (migrations, the default price table) are copied beside them, and
// .test-build/infra points at infra/ (two test helpers import its build-state.mjs). Node then runs each test file
// without a TypeScript loader: tsx's loader cost about 2 CPU-seconds of every file that starts a service.
// Skipped when .test-build/.built is newer than every file it is made from; rebuilt whole otherwise, so a test file
// that was deleted leaves no compiled copy behind. A failed type check leaves no .built: the next run builds again.
import { execFileSync } from "node:child_process";
import { existsSync, rmSync, statSync, symlinkSync } from "node:fs";
import { newest } from "./build-state.mjs";
import { copyAssets } from "./copy-assets.mjs";

const OUT = ".test-build";
const STAMP = `${OUT}/.built`;
const SOURCES = ["src", "gen", "test", "bench", "tsconfig.json", "tsconfig.tests.json"];

const latest = Math.max(...SOURCES.map((path) => (statSync(path).isDirectory() ? newest(path) : statSync(path).mtimeMs)));
if (existsSync(STAMP) && statSync(STAMP).mtimeMs >= latest) {
  process.stdout.write(`${OUT}/ is current\n`);
  process.exit(0);
}
const started = Date.now();
rmSync(OUT, { recursive: true, force: true });
try {
  execFileSync("node_modules/.bin/tsc", ["-p", "tsconfig.tests.json"], { stdio: "inherit" });
} catch {
  process.exit(1);
}
symlinkSync("../infra", `${OUT}/infra`, "dir");
copyAssets(OUT); // last: it writes the stamp
process.stdout.write(`${OUT}/ built in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
