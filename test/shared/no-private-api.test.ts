// backends: embedded
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

/*
 * Dependencies are used through their public API only: a private member
 * (`x._y`, `x["_y"]`), swapping a library's own event listeners out, or
 * telling its errors apart by their text all break silently on a minor
 * upgrade. This reads every source file for the forms they take.
 */

const SRC = fileURLToPath(new URL("../../../src/", import.meta.url));
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** Code only: comments may name what is avoided and why. */
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");

const FORBIDDEN: readonly (readonly [string, RegExp])[] = [
  ["a private member", /[\w)\]]\??\._[A-Za-z]\w*/],
  ["a private member by name", /\[\s*["'`]_[A-Za-z]\w*["'`]\s*\]/],
  ["another's listeners removed", /\.removeAllListeners\s*\(/],
  ["another's listeners taken", /\.listeners\s*\(\s*["'`]/],
  ["an error told apart by its text", /\.(rawMessage|message)\s*\.\s*(startsWith|endsWith|includes|match)\s*\(|\.(rawMessage|message)\s*===?\s*["'`]/],
  // Every export of Connect's protocol-connect, -grpc and -grpc-web modules is marked internal (no semver).
  ["a Connect protocol internal", /from\s+["'`]@connectrpc\/connect\/protocol-(connect|grpc|grpc-web)["'`]/],
];

describe("dependencies through their public API only", () => {
  it("when any source file is read, then it reaches no private member, swaps no library listener and matches no error text", () => {
    const files = sourceFiles(SRC);
    assert.ok(files.length > 100, `the sources are found (${files.length} files)`);
    const found: string[] = [];
    for (const file of files) {
      const lines = withoutComments(readFileSync(file, "utf8")).split("\n");
      lines.forEach((line, index) => {
        for (const [what, pattern] of FORBIDDEN) {
          if (pattern.test(line)) found.push(`${relative(SRC, file)}:${index + 1}: ${what}: ${line.trim()}`);
        }
      });
    }
    assert.deepEqual(found, []);
  });

  it("when the tests and benches are read, then none imports a Connect protocol internal either", () => {
    const files = ["test", "bench"].flatMap((dir) => sourceFiles(join(ROOT, dir)));
    assert.ok(files.length > 100, `the tests are found (${files.length} files)`);
    const internal = FORBIDDEN.find(([what]) => what === "a Connect protocol internal")![1];
    const found = files.filter((file) => internal.test(withoutComments(readFileSync(file, "utf8")))).map((file) => relative(ROOT, file));
    assert.deepEqual(found, []);
  });
});
