// `npm run docs:config`: rewrites the configuration table of docs/configuration.md (TABLE_FILE, between
// <!-- config-table:start --> and <!-- config-table:end -->) from the configuration's schema (src/config/schema.ts).
// test/config/config-table.test.ts fails when the document's table is not what this writes.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { TABLE_FILE, withConfigurationTable } from "../src/config/table.js";

const file = fileURLToPath(new URL(`../${TABLE_FILE}`, import.meta.url));
const before = readFileSync(file, "utf8");
const after = withConfigurationTable(before);
if (after === before) {
  process.stdout.write(`${TABLE_FILE}'s configuration table is current\n`);
} else {
  writeFileSync(file, after);
  process.stdout.write(`${TABLE_FILE}'s configuration table rewritten from src/config/schema.ts\n`);
}
