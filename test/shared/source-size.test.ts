// backends: embedded
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import ts from "typescript";
import { REPO_ROOT } from "../support/repo.js";

/**
 * Issue 36: no unit of src/ grows past what a reader holds in mind. A source
 * file has at most MAX_FILE_LINES lines, and a function (a declaration, a
 * method, a constructor, an accessor, an arrow or function expression) spans
 * at most MAX_FUNCTION_LINES lines, nested functions included, so one big
 * closure counts as what it is.
 */
const MAX_FILE_LINES = 500;
const MAX_FUNCTION_LINES = 120;

/** issue 36: being split (in other worktrees); empty this list once they land. Paths relative to the repository. */
const BEING_SPLIT: readonly string[] = [];

const SRC = join(REPO_ROOT, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|mts|cts)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

const lineCount = (text: string) => text.split("\n").length - (text.endsWith("\n") ? 1 : 0);

/**
 * A function's name as a reader finds it: its own, or the variable, property or method it is
 * assigned to; an anonymous one is named after the function around it ("outer/<anonymous>").
 */
function nameOf(node: ts.Node, file: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name) return named.name.getText(file);
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name) return parent.name.getText(file);
  for (let outer = parent; outer; outer = outer.parent) {
    if (ts.isFunctionLike(outer)) return `${nameOf(outer, file)}/<anonymous>`;
  }
  return "<anonymous>";
}

interface LongFunction {
  readonly key: string;
  readonly lines: number;
  readonly where: string;
}

function longFunctions(path: string): LongFunction[] {
  const text = readFileSync(path, "utf8");
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const end = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > MAX_FUNCTION_LINES) {
        const rel = relative(REPO_ROOT, path);
        found.push({ key: `${rel}:${nameOf(node, file)}`, lines, where: `${rel}:${start + 1}` });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe("source size (issue 36)", () => {
  const files = sourceFiles(SRC);

  it(`when a file in src/ is measured, then none has more than ${MAX_FILE_LINES} lines`, () => {
    const tooLong = files
      .map((path) => ({ path: relative(REPO_ROOT, path), lines: lineCount(readFileSync(path, "utf8")) }))
      .filter(({ path, lines }) => lines > MAX_FILE_LINES && !BEING_SPLIT.includes(path));
    assert.deepEqual(tooLong, [], `files over ${MAX_FILE_LINES} lines: split them into cohesive units\n${tooLong.map((f) => `  ${f.path}: ${f.lines}`).join("\n")}`);
  });

  it(`when a function in src/ is measured, then none spans more than ${MAX_FUNCTION_LINES} lines`, () => {
    const tooLong = files.flatMap(longFunctions);
    assert.deepEqual(
      tooLong.map(({ key }) => key), [],
      `functions over ${MAX_FUNCTION_LINES} lines: split them into named units\n${tooLong.map((f) => `  ${f.where} ${f.key}: ${f.lines} lines`).join("\n")}`,
    );
  });

  it("when the list of files still being split is read, then each names a file still too long (an entry is dropped once split)", () => {
    const big = BEING_SPLIT.filter((path) => {
      try {
        return lineCount(readFileSync(join(REPO_ROOT, path), "utf8")) > MAX_FILE_LINES;
      } catch {
        return false;
      }
    });
    assert.deepEqual(BEING_SPLIT.filter((path) => !big.includes(path)), [], "split already: remove from BEING_SPLIT");
  });
});
