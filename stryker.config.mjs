// Mutation testing of the pure domain layer (src/domain) against its unit tests (test/domain).
// Run: npm run mutation                      (all of src/domain: about an hour on 2 cores)
//      npm run mutation -- --mutate src/domain/money.ts   (one file while working on its tests)
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: "command",
  // Each mutant runs the whole domain suite; the mutant is switched on by an environment variable.
  commandRunner: { command: "node --import tsx --test test/domain/*.test.ts" },
  mutate: ["src/domain/**/*.ts"],
  // Only what the domain tests read is copied to the sandbox (node_modules is symlinked).
  ignorePatterns: ["/*", "!/src", "!/test", "!/package.json", "!/tsconfig.json"],
  coverageAnalysis: "off", // the command runner cannot tell which test covers which mutant
  concurrency: 2, // the machine has 2 cores
  timeoutMS: 30000, // generous: the machine is shared, and a slow run must not pass for a killed mutant
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  clearTextReporter: { allowColor: false, reportScoreTable: true, reportMutants: true },
  thresholds: { high: 95, low: 90, break: 90 },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
};
