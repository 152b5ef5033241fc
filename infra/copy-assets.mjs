// `npm run build`, after tsc: the files src/ reads at run time beside its modules (migrations, the default
// price table) go to the same places under dist/src, then dist/.built marks the build's time (infra/start.mjs).
import { cpSync, writeFileSync } from "node:fs";

cpSync("src", "dist/src", {
  recursive: true,
  filter: (path) => !path.endsWith(".ts") && !path.endsWith(".mjs"),
});
writeFileSync("dist/.built", `${new Date().toISOString()}\n`);
