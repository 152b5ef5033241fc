// `npm run docs:config`: rewrites README.md's configuration table (between <!-- config-table:start --> and
// <!-- config-table:end -->) from the configuration's schema (src/config/schema.ts). test/core/config-table.test.ts
// fails when the README's table is not what this writes.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { withConfigurationTable } from "../src/config/table.js";

const readme = fileURLToPath(new URL("../README.md", import.meta.url));
const before = readFileSync(readme, "utf8");
const after = withConfigurationTable(before);
if (after === before) {
  process.stdout.write("README.md's configuration table is current\n");
} else {
  writeFileSync(readme, after);
  process.stdout.write("README.md's configuration table rewritten from src/config/schema.ts\n");
}
