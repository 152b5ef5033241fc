// backends: embedded
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { repoPath } from "../support/repo.js";

/*
 * The suite's own rules, read from its sources: one way to wait for something (test/support/eventually.ts, never a
 * polling helper of a test's own), no test that swaps a global out (a timer, the clock) or reads an error's stack
 * text to tell what ran, and no test file that proves nothing itself (every *.test.ts calls assert).
 */

const TEST = repoPath("test");
const THE_ONE_EVENTUALLY = "support/eventually.ts";
/** This file: it names the forms it looks for. */
const SELF = "shared/test-hygiene.test.ts";

function typeScriptFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" || entry.name === "fixtures" ? [] : typeScriptFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** Code only: comments may name what is avoided and why. */
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");

const sources = () =>
  typeScriptFiles(TEST)
    .map((path) => ({ name: relative(TEST, path), code: withoutComments(readFileSync(path, "utf8")) }))
    .filter((file) => file.name !== SELF);

/** Lines of `code` that match `pattern`, as "file:line: text". */
function matching(files: { name: string; code: string }[], pattern: RegExp): string[] {
  return files.flatMap(({ name, code }) =>
    code.split("\n").flatMap((line, index) => (pattern.test(line) ? [`test/${name}:${index + 1}: ${line.trim()}`] : [])),
  );
}

/** A polling helper named eventually, defined (a function or a constant). */
const EVENTUALLY_DEFINED = /\b(function\s*\*?\s*eventually\b|(const|let|var)\s+eventually\s*=)/;
/** An error's stack read (what ran, told by its text). */
const STACK_READ = /\.stack\b/;
/** A call of node:assert (assert(…), assert.equal(…), assert.rejects(…), …). */
const ASSERT_CALL = /\bassert(\.\w+)*\s*\(/;

const PATCHED_GLOBALS: readonly (readonly [string, RegExp])[] = [
  ["a global replaced", /\bglobalThis\s*(\.\s*\w+|\[[^\]]+\])\s*(=(?!=)|\+=|-=)/],
  ["a global redefined", /Object\.(defineProperty|assign)\s*\(\s*(globalThis|process|Date|Math|console)\b/],
  ["the clock or randomness replaced", /\b(Date\.now|Math\.random|performance\.now)\s*=(?!=)/],
  ["a timer replaced", /(^|[^.\w])(setTimeout|setInterval|setImmediate|queueMicrotask)\s*=(?!=)/],
  ["process replaced", /\bprocess\.[\w.]+\s*=(?!=)/],
  ["node:test's mocks of globals", /\bmock\.(timers|method\s*\(\s*(globalThis|process|Date|Math|console)\b)/],
];

describe("the test suite's own rules", () => {
  it("when the tests wait for something, then they wait through the one eventually, in test/support/eventually.ts", () => {
    const files = sources();
    assert.ok(files.length > 100, `the test sources are found (${files.length} files)`);
    const defined = matching(files, EVENTUALLY_DEFINED);
    assert.deepEqual(
      defined.map((hit) => hit.split(":")[0]),
      [`test/${THE_ONE_EVENTUALLY}`],
      `one definition of eventually, in test/${THE_ONE_EVENTUALLY}: ${defined.join("; ")}`,
    );
  });

  it("when a test runs, then it patches no global (timers, the clock, process) and reads no stack text", () => {
    const files = sources();
    const found = [
      ...PATCHED_GLOBALS.flatMap(([what, pattern]) => matching(files, pattern).map((hit) => `${what}: ${hit}`)),
      ...matching(files, STACK_READ).map((hit) => `stack text read: ${hit}`),
    ];
    assert.deepEqual(found, []);
  });

  it("when a test file runs, then it asserts something itself, not only through files it imports", () => {
    const files = sources().filter((file) => file.name.endsWith(".test.ts"));
    assert.ok(files.length > 100, `the test files are found (${files.length})`);
    const silent = files.filter((file) => !ASSERT_CALL.test(file.code)).map((file) => `test/${file.name}`);
    assert.deepEqual(silent, []);
  });

  it("when the rules read a test that breaks them, then each is found", () => {
    const broken = [
      { name: "core/a.test.ts", code: "async function eventually() {}\nglobalThis.setTimeout = spy;\nif (new Error().stack?.includes(\"x\")) n++;" },
      { name: "core/b.test.ts", code: "Date.now = () => 0;\nprocess.emitWarning = () => {};\nmock.timers.enable();" },
    ];
    assert.deepEqual(matching(broken, EVENTUALLY_DEFINED).length, 1);
    const patched = PATCHED_GLOBALS.flatMap(([what, pattern]) => matching(broken, pattern).map(() => what));
    assert.deepEqual(patched.sort(), ["a global replaced", "node:test's mocks of globals", "process replaced", "the clock or randomness replaced"]);
    assert.equal(matching(broken, STACK_READ).length, 1);
    assert.equal(ASSERT_CALL.test('import "./suite.js";'), false);
  });
});
