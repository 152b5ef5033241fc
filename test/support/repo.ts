import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The repository's root: the nearest directory above this module that holds `package.json`. The tests run from
 * their sources (tsx) or compiled into `.test-build/` (`npm test`), so a repository file (README, protos, fixtures,
 * the tools' venvs, a source a child process runs) is found from here, never from a test module's own location.
 */
export const REPO_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** A path inside the repository. */
export function repoPath(...parts: string[]): string {
  return join(REPO_ROOT, ...parts);
}
