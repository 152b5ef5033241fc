#!/usr/bin/env bash
# npm test's checks before the suite, side by side (each is one single-threaded process, and the host
# has two cores): the layer rules, the compiled suite (infra/build-tests.mjs type-checks src, gen, test
# and bench), the panel's type check. Each one's output is printed whole when all have ended; any failure
# fails the checks.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
run() {
  local name=$1; shift
  ( "$@" >"$LOGS/$name.log" 2>&1; echo $? >"$LOGS/$name.rc" ) &
}
run lint-deps npm run --silent lint:deps
run build-tests node infra/build-tests.mjs
run panel npx tsc --noEmit -p panel
wait
failed=0
for name in lint-deps build-tests panel; do
  rc=$(cat "$LOGS/$name.rc")
  echo "::: $name (exit $rc)"
  cat "$LOGS/$name.log"
  [[ $rc == 0 ]] || failed=1
done
exit "$failed"
