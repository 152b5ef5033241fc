// backends: embedded
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cruise, type ICruiseResult } from "dependency-cruiser";
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";
import { REPO_ROOT, repoPath } from "../support/repo.js";

/*
 * The layer rules of src/ (.dependency-cruiser.cjs: domain ← ports ← core ←
 * transport, adapters beside the core, config and shared at the bottom, no
 * cycles), checked here too so that the embedded suite fails on a broken
 * one as `npm run lint:deps` does: the same configuration, through
 * dependency-cruiser's API.
 */

async function cruiseSources(): Promise<ICruiseResult> {
  const options = await extractDepcruiseOptions(repoPath(".dependency-cruiser.cjs"));
  const tsConfig = extractTSConfig(repoPath("tsconfig.json"));
  const { output } = await cruise(
    ["src"],
    { ...options, baseDir: REPO_ROOT, tsConfig: { fileName: repoPath("tsconfig.json") }, outputType: "json" },
    undefined,
    { tsConfig },
  );
  return typeof output === "string" ? (JSON.parse(output) as ICruiseResult) : output;
}

describe("layer rules", () => {
  it("when src/ is cruised with the project's rules, then no import breaks one", async () => {
    const result = await cruiseSources();
    assert.ok(result.summary.totalCruised > 200, `the sources are found (${result.summary.totalCruised} modules)`);
    assert.ok(result.summary.ruleSetUsed?.forbidden?.length, "the rules are read");
    const broken = result.summary.violations.map((violation) =>
      violation.cycle?.length
        ? `${violation.rule.name}: ${[violation.from, ...violation.cycle.map((step) => step.name)].join(" → ")}`
        : `${violation.rule.name}: ${violation.from} → ${violation.to}`,
    );
    assert.deepEqual(broken, [], `imports that break the layer rules (.dependency-cruiser.cjs):\n${broken.join("\n")}`);
  });
});
