import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { markerLines, README_TESTS, readmeBlock, readReadme, ROOT, shellBlocks, type ReadmeTestName } from "../support/readme-blocks.js";

/**
 * Every shell block of the README is accounted for: run by a test exactly as
 * written (the walk-through's blocks, and each block marked
 * `<!-- readme-test: NAME -->`, read by the files that README_TESTS names), or
 * marked `<!-- readme-not-run: reason -->`. A new block without either, a
 * marker no test reads, or a test reading a marker the README lost, fails here
 * with its line.
 */

describe("the README's shell blocks", () => {
  const markdown = readReadme();

  it("when the README is read, then every shell block is in the walk-through, marked readme-test, or marked readme-not-run with a reason", () => {
    const blocks = shellBlocks(markdown);
    const unmarked = blocks.filter((block) => block.status.kind === "unmarked").map((block) => `line ${block.line}: ${block.body.split("\n")[0]}`);
    assert.deepEqual(unmarked, [], "shell blocks neither run by a test nor marked <!-- readme-not-run: reason -->");
    for (const block of blocks) {
      if (block.status.kind === "not-run") assert.ok(block.status.reason.length >= 20, `README.md line ${block.line}: say why the block is not run`);
    }
    // The walk-through alone has more than six blocks; with the marked ones, most blocks are run.
    const run = blocks.filter((block) => block.status.kind === "walkthrough" || block.status.kind === "test");
    assert.ok(run.length >= 12, `expected at least 12 shell blocks run by tests, found ${run.length}`);
  });

  it("when the README's markers are read, then each is well formed, names a block a test reads, and sits right before a fenced block", () => {
    const markers = markerLines(markdown);
    for (const marker of markers) {
      assert.ok(marker.test !== undefined || marker.notRun !== undefined, `README.md line ${marker.line}: not a marker this suite knows: ${marker.text}`);
      if (marker.test !== undefined) {
        assert.ok(marker.test in README_TESTS, `README.md line ${marker.line}: no test reads the block marked ${marker.test} (list it in README_TESTS)`);
      }
    }
    for (const name of Object.keys(README_TESTS) as ReadmeTestName[]) readmeBlock(name, markdown);
  });

  it("when a marker is listed as read by a file, then that file names it", () => {
    for (const [name, files] of Object.entries(README_TESTS)) {
      for (const file of files) {
        assert.ok(readFileSync(join(ROOT, file), "utf8").includes(`"${name}"`), `${file} does not read the README block ${name}`);
      }
    }
  });
});
