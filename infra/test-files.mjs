// `node infra/test-files.mjs <embedded|real|outage>`: the compiled test files one run of `npm test` runs, one per
// line, for `node --test`. test/ is arranged by subject; which runs a file belongs to is a parameter of the file,
// not of its folder: the first line of every test/**/*.test.ts declares it, read here without running the file:
//
//   // backends: embedded, real
//
// embedded: `npm run test:embedded` (SQLite in a temporary DATA_DIR); real: `npm run test:real`, again with
// TEST_BACKEND=real on Cassandra + Kafka; outage: `npm run test:outage`, which stops and starts those servers.
// A file without the line, or naming anything else, stops the run here (and test/shared/test-backends.test.ts fails).
// The longest files come first (FIRST): two files at a time, they start while the rest fill the other slot, rather
// than one of them running alone at the end.
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const RUNS = ["embedded", "real", "outage"];
const DECLARATION = /^\/\/ backends: ([a-z]+(?:, [a-z]+)*)\s*$/;
const ROOT = join(fileURLToPath(new URL(".", import.meta.url)), "..");
/** Whole-process tests, then the Schemathesis run (one to two minutes on one core): the files that take longest. */
const FIRST = ["test/system/", "test/transport/openapi-fuzz.test.ts"];

/** Every test file's source, as a path relative to the repository ("test/core/billing.test.ts"). */
export function testSources(root = ROOT) {
  const walk = (dir) =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return entry.name === "fixtures" || entry.name === "node_modules" ? [] : walk(path);
      return entry.name.endsWith(".test.ts") ? [path] : [];
    });
  return walk("test").sort();
}

/** The runs a test file's source declares, or the reason its declaration is missing or wrong. */
export function declaredRuns(source) {
  const first = source.split("\n", 1)[0];
  const match = DECLARATION.exec(first);
  if (!match) return { error: `its first line is not "// backends: <${RUNS.join("|")}>, …": ${JSON.stringify(first)}` };
  const runs = match[1].split(", ");
  const unknown = runs.filter((run) => !RUNS.includes(run));
  if (unknown.length > 0) return { error: `it names unknown backends ${unknown.join(", ")} (known: ${RUNS.join(", ")})` };
  if (new Set(runs).size !== runs.length) return { error: `it names a backend twice: ${match[1]}` };
  return { runs };
}

/** Each test file with its runs; `errors` lists every file whose declaration is missing or wrong. */
export function testPlan(root = ROOT) {
  const files = [];
  const errors = [];
  for (const path of testSources(root)) {
    const declared = declaredRuns(readFileSync(join(root, path), "utf8"));
    if (declared.error) errors.push(`${path}: ${declared.error}`);
    else files.push({ path, runs: declared.runs });
  }
  return { files, errors };
}

/** The compiled files of one run, the longest (FIRST) first. */
export function filesOf(run, plan) {
  const rank = (path) => {
    const at = FIRST.findIndex((prefix) => path.startsWith(prefix));
    return at === -1 ? FIRST.length : at;
  };
  return plan.files
    .filter((file) => file.runs.includes(run))
    .map((file) => file.path)
    .sort((a, b) => rank(a) - rank(b))
    .map((path) => `.test-build/${path.replace(/\.ts$/, ".js")}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const run = process.argv[2];
  if (!RUNS.includes(run)) {
    process.stderr.write(`usage: node infra/test-files.mjs <${RUNS.join("|")}>\n`);
    process.exit(2);
  }
  const plan = testPlan();
  if (plan.errors.length > 0) {
    process.stderr.write(`test files without a valid backends line:\n${plan.errors.join("\n")}\n`);
    process.exit(1);
  }
  const files = filesOf(run, plan);
  if (files.length === 0) {
    process.stderr.write(`no test file declares ${run}\n`);
    process.exit(1);
  }
  process.stdout.write(`${files.join("\n")}\n`);
}
