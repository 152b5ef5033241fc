// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { REPO_ROOT, repoPath } from "../support/repo.js";

/**
 * The documentation stays readable and whole (issue 37): README.md is the front page (what it is, how to run it,
 * the walk-through, a map), each topic is a file of docs/ of a bounded size, each decision record is at most 2 KB,
 * and every relative link of the README, CONTRIBUTING.md, BENCHMARKS.md, docs/ and bench/history/ leads somewhere:
 * to a path of this checkout, and, into a markdown file, to a heading it has.
 */

const KB = 1024;
const LIMITS: readonly (readonly [string, number])[] = [
  ["README.md", 10 * KB],
  ["BENCHMARKS.md", 10 * KB],
  ["CONTRIBUTING.md", 6 * KB],
];
const DOC_LIMIT = 20 * KB;
const DECISION_LIMIT = 2 * KB;

/** Markdown files under a directory of the repository, by their path from the root. */
function markdownUnder(dir: string): string[] {
  return readdirSync(repoPath(dir), { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".md"))
    .map((path) => join(dir, path))
    .sort();
}

/** Every document whose links are checked. */
function linkedDocuments(): string[] {
  return ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md", ...markdownUnder("docs"), ...markdownUnder(join("bench", "history"))];
}

/** The markdown without its fenced blocks and inline code, where `[x](y)` is not a link. */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```\s*$/gm, "").replace(/`[^`\n]*`/g, "");
}

/** Every link target of the prose, images included. */
function linkTargets(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => match[1]!);
}

/** The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = match[1]!
      .replace(/`/g, "")
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

describe("the documentation's sizes and links", () => {
  it("when README.md, BENCHMARKS.md and CONTRIBUTING.md are measured, then each is within its bound (10, 10 and 6 KB)", () => {
    for (const [path, limit] of LIMITS) {
      const size = statSync(repoPath(path)).size;
      assert.ok(size <= limit, `${path} is ${size} bytes, over its ${limit}: move a topic to docs/ (or a dated run to bench/history/)`);
    }
  });

  it("when every markdown file under docs/ is measured, then none is over 20 KB (one topic a file: split a topic in two)", () => {
    const docs = markdownUnder("docs");
    assert.ok(docs.length >= 10, `docs/ holds the topics (found ${docs.length})`);
    const over = docs.map((path) => [path, statSync(repoPath(path)).size] as const).filter(([, size]) => size > DOC_LIMIT);
    assert.deepEqual(over, [], "docs over 20 KB");
  });

  it("when every decision record under docs/decisions/ is measured, then none is over 2 KB (problem, decision, cost, rejected alternatives: detail belongs in a topic doc)", () => {
    const records = markdownUnder(join("docs", "decisions"));
    assert.ok(records.length > 0, "docs/decisions/ holds records");
    const over = records.map((path) => [path, statSync(repoPath(path)).size] as const).filter(([, size]) => size > DECISION_LIMIT);
    assert.deepEqual(over, [], "decision records over 2,048 bytes");
  });

  it("when the relative links of the README, CONTRIBUTING.md, BENCHMARKS.md, docs/ and bench/history/ are followed, then each path exists, and each anchor into a markdown file is one of its headings", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const doc of linkedDocuments()) {
      const markdown = readFileSync(repoPath(doc), "utf8");
      for (const target of linkTargets(markdown)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [path, anchor] = target.split("#", 2) as [string, string | undefined];
        const file = path === "" ? repoPath(doc) : join(dirname(repoPath(doc)), decodeURIComponent(path));
        checked++;
        if (!existsSync(file)) {
          broken.push(`${doc}: ${target} (no ${relative(REPO_ROOT, file)})`);
          continue;
        }
        if (anchor !== undefined && file.endsWith(".md") && !anchorsOf(readFileSync(file, "utf8")).has(anchor)) {
          broken.push(`${doc}: ${target} (no heading #${anchor} in ${relative(REPO_ROOT, file)})`);
        }
      }
    }
    assert.ok(checked > 50, `the documents' relative links were found (${checked})`);
    assert.deepEqual(broken, [], "relative links that lead nowhere");
  });

  it("when the README's map of the docs is read, then it links every file of docs/ (the decision records through their folder)", () => {
    const readme = readFileSync(repoPath("README.md"), "utf8");
    const linked = new Set(linkTargets(readme).map((target) => target.split("#")[0]));
    const topics = readdirSync(repoPath("docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`);
    assert.deepEqual(topics.filter((path) => !linked.has(path)), [], "docs/ files the README's map does not link");
    assert.ok(linked.has("docs/decisions/"), "the README links docs/decisions/");
  });

  it("when the decision records are listed, then each is named NNNN-title.md, numbered from 0001 without a gap", () => {
    const names = readdirSync(repoPath("docs", "decisions")).filter((name) => name.endsWith(".md")).sort();
    assert.ok(names.length > 0, "docs/decisions/ holds records");
    names.forEach((name, i) => assert.match(name, new RegExp(`^${String(i + 1).padStart(4, "0")}-[a-z0-9]+(?:-[a-z0-9]+)*\\.md$`), `docs/decisions/${name}`));
  });
});
