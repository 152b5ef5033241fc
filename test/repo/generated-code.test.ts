// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { REPO_ROOT } from "../support/repo.js";

const root = REPO_ROOT;
const bin = join(root, "node_modules", ".bin");
const buf = join(bin, "buf");
// buf finds the local protoc-gen-es plugin on PATH, as it does under `npm run`.
const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

describe("proto files and generated code", () => {
  it("pass buf lint (STANDARD)", () => {
    execFileSync(buf, ["lint"], { cwd: root, stdio: "pipe", env });
  });

  it("gen/ is exactly what `npm run generate` produces", () => {
    const out = mkdtempSync(join(tmpdir(), "gen-check-"));
    try {
      execFileSync(buf, ["generate", "-o", out], { cwd: root, stdio: "pipe", env });
      const fresh = files(join(out, "gen")).map((f) => relative(join(out, "gen"), f)).sort();
      const committed = files(join(root, "gen")).map((f) => relative(join(root, "gen"), f)).sort();
      assert.deepEqual(committed, fresh, "gen/ has missing or extra files: run npm run generate");
      for (const file of fresh) {
        assert.equal(
          readFileSync(join(root, "gen", file), "utf8"),
          readFileSync(join(out, "gen", file), "utf8"),
          `gen/${file} is stale: run npm run generate`,
        );
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
