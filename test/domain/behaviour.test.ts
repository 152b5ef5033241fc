// backends: embedded
/**
 * The domain's behaviour suites, run in one process: the mutation run (npm run mutation) runs every
 * domain test file once per mutant, and each file is a process of its own, so suites are added here
 * rather than as new test files.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { repoPath } from "../support/repo.js";
import "./behaviour/image-content.suite.js";
import "./behaviour/image-links.suite.js";
import "./behaviour/job-lifecycle.suite.js";
import "./behaviour/pricing-rules.suite.js";
import "./behaviour/request-rules.suite.js";
import "./behaviour/text-media.suite.js";
import "./behaviour/text-tools.suite.js";

describe("the domain's behaviour suites", () => {
  it("when this file runs, then it runs every suite in test/domain/behaviour, so none is left out of the mutation run", () => {
    const suites = readdirSync(repoPath("test/domain/behaviour")).filter((name) => name.endsWith(".suite.ts"));
    assert.ok(suites.length >= 4, `the suites are found: ${suites.join(", ")}`);
    const imported = [...readFileSync(repoPath("test/domain/behaviour.test.ts"), "utf8").matchAll(/^import "\.\/behaviour\/([\w-]+)\.suite\.js";$/gm)].map((m) => `${m[1]}.suite.ts`);
    assert.deepEqual(imported.sort(), suites.sort());
  });
});
