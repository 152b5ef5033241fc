// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { VARIABLES } from "../../src/config/schema.js";
import {
  documentedVariables, TABLE_END, TABLE_FILE, TABLE_FILES, TABLE_START, tableFileOf, tableOf, withConfigurationTable,
} from "../../src/config/table.js";
import { configurationVariables, readDoc } from "../support/readme-blocks.js";
import { repoPath } from "../support/repo.js";

/** The TypeScript sources under a directory of the repository, by their path from the repository's root. */
function sources(dir: string): string[] {
  return readdirSync(repoPath(dir), { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts"))
    .map((path) => join(dir, path));
}

describe("config: the configuration tables of docs/ are the schema's", () => {
  it("when docs/configuration.md and docs/configuration-cassandra-kafka.md are read, then the table between each one's config-table markers is the one `npm run docs:config` writes from the schema", () => {
    assert.deepEqual(TABLE_FILES, ["docs/configuration.md", "docs/configuration-cassandra-kafka.md"]);
    for (const file of TABLE_FILES) {
      const doc = readDoc(file);
      assert.ok(doc.includes(`${TABLE_START}\n${tableOf(file)}\n${TABLE_END}`),
        `${file}'s configuration table differs from src/config/schema.ts: run \`npm run docs:config\``);
      assert.equal(withConfigurationTable(doc, tableOf(file)), doc);
    }
    assert.equal(tableFileOf("KAFKA_ACKS"), "docs/configuration-cassandra-kafka.md");
    assert.equal(tableFileOf("PORT"), TABLE_FILE);
  });

  it("when the schema and the tables are compared, then every variable the schema declares is a row, and every row a declared variable, once and in order", () => {
    for (const file of TABLE_FILES) {
      assert.deepEqual(configurationVariables(readDoc(file)), Object.keys(VARIABLES).filter((name) => tableFileOf(name) === file), file);
    }
    assert.deepEqual([...configurationVariables()].sort(), Object.keys(VARIABLES).sort());
    assert.deepEqual(documentedVariables().map((doc) => doc.name), Object.keys(VARIABLES));
  });

  it("when a variable is declared, then it has a meaning and a default (a value, or what stands for it)", () => {
    for (const doc of documentedVariables()) {
      assert.ok(doc.description.length > 10, doc.name);
      assert.ok(doc.default !== undefined || doc.defaultText !== undefined, `${doc.name} has a default or says what stands for one`);
    }
  });

  it("when the table is rewritten, then only what is between the markers changes, and a document without them is refused", () => {
    const markdown = `# Title\n\ntext\n\n${TABLE_START}\nold table\n${TABLE_END}\n\nafter\n`;
    assert.equal(withConfigurationTable(markdown, "| new |"), `# Title\n\ntext\n\n${TABLE_START}\n| new |\n${TABLE_END}\n\nafter\n`);
    assert.throws(() => withConfigurationTable("# no markers\n"), /config-table:start/);
  });
});

describe("config: reads the environment and nothing else", () => {
  it("when src/ is searched, then nothing outside src/config/ reads process.env", () => {
    const readers = sources("src")
      .filter((path) => !path.startsWith(join("src", "config")))
      .filter((path) => /\bprocess\.env\b/.test(readFileSync(repoPath(path), "utf8")));
    assert.deepEqual(readers, []);
  });

  it("when src/config/ is searched, then it imports nothing of the service outside it, and no file-system module", () => {
    let seen = 0;
    for (const path of sources(join("src", "config"))) {
      const text = readFileSync(repoPath(path), "utf8");
      const imports = [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^;]*?from\s+"([^"]+)"/g)].map((match) => match[1]!);
      seen += imports.length;
      for (const specifier of imports) {
        if (specifier.startsWith(".")) {
          const target = relative(repoPath("src", "config"), resolve(dirname(repoPath(path)), specifier));
          assert.ok(!target.startsWith(".."), `${path} imports ${specifier}, outside src/config/`);
        }
        assert.ok(!/^(node:)?fs(\/promises)?$/.test(specifier), `${path} imports ${specifier}`);
      }
    }
    assert.ok(seen > 5, `the imports of src/config/ were found (${seen})`);
  });
});
