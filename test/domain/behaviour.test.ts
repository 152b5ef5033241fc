/**
 * The domain's behaviour suites, run in one process: the mutation run (npm run mutation) runs every
 * domain test file once per mutant, and each file is a process of its own, so suites are added here
 * rather than as new test files.
 */
import "./behaviour/job-lifecycle.suite.js";
import "./behaviour/pricing-rules.suite.js";
import "./behaviour/request-rules.suite.js";
import "./behaviour/text-media.suite.js";
