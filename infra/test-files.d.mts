/** See test-files.mjs. */
export const RUNS: readonly string[];
export interface TestPlan {
  readonly files: { readonly path: string; readonly runs: readonly string[] }[];
  readonly errors: string[];
}
export function testSources(root?: string): string[];
export function declaredRuns(source: string): { runs: string[]; error?: undefined } | { error: string; runs?: undefined };
export function testPlan(root?: string): TestPlan;
export function filesOf(run: string, plan: TestPlan): string[];
