// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { documentPaths, markerLines, README_TESTS, readDoc, readmeBlock, ROOT, shellBlocks, type ReadmeTestName } from "../support/readme-blocks.js";

/**
 * Every shell block of the README and of the documents beside it (CONTRIBUTING.md, docs/) is accounted for: run by
 * a test exactly as written (the README walk-through's blocks, and each block marked `<!-- readme-test: NAME -->`,
 * read by the files that README_TESTS names for that document), or marked `<!-- readme-not-run: reason -->`. A new
 * block without either, a marker no test reads, a marker in another document than the one its test reads, or a
 * test reading a marker its document lost, fails here with its file and line.
 */

describe("the shell blocks of the README, CONTRIBUTING.md and docs/", () => {
  const documents = documentPaths().map((path) => ({ path, markdown: readDoc(path) }));

  it("when the documents are read, then every shell block is in the walk-through, marked readme-test, or marked readme-not-run with a reason", () => {
    assert.ok(documents.length > 10, `README.md, CONTRIBUTING.md and docs/ are read (found ${documents.length})`);
    let run = 0;
    for (const { path, markdown } of documents) {
      const blocks = shellBlocks(markdown, path);
      const unmarked = blocks.filter((block) => block.status.kind === "unmarked").map((block) => `${path} line ${block.line}: ${block.body.split("\n")[0]}`);
      assert.deepEqual(unmarked, [], "shell blocks neither run by a test nor marked <!-- readme-not-run: reason -->");
      for (const block of blocks) {
        if (block.status.kind === "not-run") assert.ok(block.status.reason.length >= 20, `${path} line ${block.line}: say why the block is not run`);
      }
      run += blocks.filter((block) => block.status.kind === "walkthrough" || block.status.kind === "test").length;
    }
    // The walk-through alone has more than six blocks; with the marked ones, most blocks are run.
    assert.ok(run >= 12, `expected at least 12 shell blocks run by tests, found ${run}`);
  });

  it("when the documents' markers are read, then each is well formed, names a block a test reads in that document, and sits right before a fenced block", () => {
    for (const { path, markdown } of documents) {
      for (const marker of markerLines(markdown)) {
        assert.ok(marker.test !== undefined || marker.notRun !== undefined, `${path} line ${marker.line}: not a marker this suite knows: ${marker.text}`);
        if (marker.test !== undefined) {
          assert.ok(marker.test in README_TESTS, `${path} line ${marker.line}: no test reads the block marked ${marker.test} (list it in README_TESTS)`);
          assert.equal(README_TESTS[marker.test as ReadmeTestName].doc, path, `${path} line ${marker.line}: the block marked ${marker.test} is read from ${README_TESTS[marker.test as ReadmeTestName].doc}`);
        }
      }
    }
    for (const name of Object.keys(README_TESTS) as ReadmeTestName[]) readmeBlock(name);
  });

  it("when a marker is listed as read by a file, then that file names it", () => {
    for (const [name, { readers }] of Object.entries(README_TESTS)) {
      for (const file of readers) {
        assert.ok(readFileSync(join(ROOT, file), "utf8").includes(`"${name}"`), `${file} does not read the block ${name}`);
      }
    }
  });
});
