// backends: embedded
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { declaredRuns, filesOf, RUNS, testPlan } from "../../infra/test-files.mjs";
import { REPO_ROOT, repoPath } from "../support/repo.js";

/*
 * test/ is arranged by subject; the backends a test runs on are a parameter of the file: its first line,
 * `// backends: embedded, real`, which infra/test-files.mjs reads to give `npm run test:embedded`, `test:real` and
 * `test:outage` their files. A file whose line is missing or names an unknown backend would silently run nowhere, or
 * stop every run; a file the runner's walk does not see would never run at all.
 */

/** Every *.test.ts under test/, found by a walk of this test's own (not the runner's). */
function testFiles(dir = repoPath("test")): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "fixtures" ? [] : testFiles(path);
    return entry.name.endsWith(".test.ts") ? [relative(REPO_ROOT, path).split("\\").join("/")] : [];
  });
}

/** This file: it names the forms it looks for. */
const SELF = "test/shared/test-backends.test.ts";
const compiled = (path: string) => `.test-build/${path.replace(/\.ts$/, ".js")}`;

describe("the backends a test file runs on", () => {
  it("when a test file is in test/, then its first line declares known backends", () => {
    assert.deepEqual(testPlan(REPO_ROOT).errors, []);
  });

  it("when a declaration is missing, unknown, repeated or not on the first line, then the runner refuses it", () => {
    assert.deepEqual(declaredRuns("// backends: embedded, real\nimport x;").runs, ["embedded", "real"]);
    assert.deepEqual(declaredRuns("// backends: outage\n").runs, ["outage"]);
    assert.match(declaredRuns('import { it } from "node:test";\n').error ?? "", /first line/);
    assert.match(declaredRuns("// backends: embedded, cassandra\n").error ?? "", /unknown backends cassandra/);
    assert.match(declaredRuns("// backends: real, real\n").error ?? "", /twice/);
    assert.match(declaredRuns("// backends:\n").error ?? "", /first line/);
    assert.match(declaredRuns("\n// backends: embedded\n").error ?? "", /first line/);
  });

  it("when the runner lists a run's files, then every test file is in each run it declares and in no other", () => {
    const plan = testPlan(REPO_ROOT);
    const files = testFiles().sort();
    assert.deepEqual(plan.files.map((file) => file.path).sort(), files, "the runner's walk and this one see the same files");
    for (const run of RUNS) {
      const listed = filesOf(run, plan);
      assert.equal(new Set(listed).size, listed.length, `${run}: no file twice`);
      const declaring = files.filter((path) => declaredRuns(readFileSync(repoPath(path), "utf8")).runs?.includes(run));
      assert.deepEqual([...listed].sort(), declaring.map(compiled).sort(), `${run}: exactly the files that declare it`);
      assert.ok(listed.length > 0, `${run}: some file runs in it`);
    }
    const everywhere = new Set(RUNS.flatMap((run) => filesOf(run, plan)));
    assert.deepEqual(files.filter((path) => !everywhere.has(compiled(path))), [], "every test file runs somewhere");
  });

  it("when every file declares embedded, then test:embedded still runs the whole suite once", () => {
    const plan = testPlan(REPO_ROOT);
    assert.deepEqual(
      plan.files.filter((file) => !file.runs.includes("embedded")).map((file) => file.path),
      [],
      "test:embedded runs every file (those for the real servers skip themselves there)",
    );
  });

  it("when a test file branches on TEST_BACKEND, then it declares the real or outage run that sets it", () => {
    const branching = testFiles().filter((path) => {
      const source = readFileSync(repoPath(path), "utf8");
      const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
      return path !== SELF && /\bBACKEND\s*[!=]==|[!=]==\s*BACKEND\b|process\.env\.TEST_BACKEND\b/.test(code);
    });
    const undeclared = branching.filter((path) => {
      const runs = declaredRuns(readFileSync(repoPath(path), "utf8")).runs ?? [];
      return !runs.includes("real") && !runs.includes("outage");
    });
    assert.ok(branching.length > 0);
    assert.deepEqual(undeclared, []);
  });
});
