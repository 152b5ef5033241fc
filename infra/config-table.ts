// `npm run docs:config`: rewrites the configuration tables of docs/configuration.md and
// docs/configuration-cassandra-kafka.md (TABLE_FILES, each between <!-- config-table:start --> and
// <!-- config-table:end -->) from the configuration's schema (src/config/schema.ts).
// test/config/config-table.test.ts fails when a document's table is not what this writes.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { TABLE_FILES, tableOf, withConfigurationTable } from "../src/config/table.js";

for (const name of TABLE_FILES) {
  const file = fileURLToPath(new URL(`../${name}`, import.meta.url));
  const before = readFileSync(file, "utf8");
  const after = withConfigurationTable(before, tableOf(name));
  if (after === before) {
    process.stdout.write(`${name}'s configuration table is current\n`);
  } else {
    writeFileSync(file, after);
    process.stdout.write(`${name}'s configuration table rewritten from src/config/schema.ts\n`);
  }
}
