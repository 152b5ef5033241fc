// After tsc: the files src/ reads at run time beside its modules (migrations, the default price table) go to the
// same places under <out>/src, then <out>/.built marks the build's time (infra/start.mjs reads dist's;
// infra/build-tests.mjs .test-build's). Run as a script (`npm run build`), for dist/.
import { cpSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export function copyAssets(out) {
  cpSync("src", `${out}/src`, {
    recursive: true,
    filter: (path) => !path.endsWith(".ts") && !path.endsWith(".mjs"),
  });
  writeFileSync(`${out}/.built`, `${new Date().toISOString()}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) copyAssets("dist");
