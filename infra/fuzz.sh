#!/usr/bin/env bash
# The long fuzz run: Schemathesis against the service's own /openapi.json with
# many more examples than the test suite's bounded run
# (test/transport/openapi-fuzz.test.ts), and a new seed each time.
#
# Starts its own service (`npm start`, embedded, a temporary DATA_DIR, a random
# ADMIN_TOKEN, free loopback ports), waits for /readyz, creates an account and
# a key, and runs `st` with the same config and hooks as the test:
# test/support/schemathesis.toml and test/support/schemathesis_hooks.py (every
# error answer checked for moved money and created jobs, counted read-only in
# DATA_DIR/service.db). At the end it replays the balances the same way the
# test does (test/support/schemathesis_ledger.py). Stops the service whatever
# happened; keeps the reports and the service log in the printed directory.
#
# Usage: infra/fuzz.sh [extra st run options…]
#   FUZZ_MAX_EXAMPLES  examples per operation and phase (default 300)
#   FUZZ_SEED          a seed to replay (default: a new one, printed)
#   FUZZ_MAX_TIME      seconds for the whole st run, fuzzing repeated until spent (default: unset)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$INFRA_DIR/schemathesis.sh"
ST="$STATE_DIR/schemathesis/bin/st"
PY="$STATE_DIR/schemathesis/bin/python"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/generation-fuzz.XXXXXX")
DATA_DIR="$WORK/data"
ADMIN_TOKEN="fuzz-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
GRPC_PORT=$(free_port)
BASE_URL="http://127.0.0.1:$PORT"
SEED=${FUZZ_SEED:-$("$PY" -c 'import random; print(random.getrandbits(63))')}
MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-300}

# The service runs in a process group of its own, so stopping it stops npm, tsx and node together.
SERVICE_PGID=""
stop_service() {
  if [[ -n $SERVICE_PGID ]] && kill -0 -- "-$SERVICE_PGID" 2>/dev/null; then
    kill -INT -- "-$SERVICE_PGID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 -- "-$SERVICE_PGID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$SERVICE_PGID" 2>/dev/null || true
  fi
  log "reports, journal and service log kept in $WORK"
}
trap stop_service EXIT

# `npm start` runs dist/: build it from the sources as they are.
(cd "$REPO_DIR" && npm run --silent build)
log "starting the service on $BASE_URL (DATA_DIR $DATA_DIR)"
mkdir -p "$DATA_DIR"
(
  cd "$REPO_DIR"
  # Generated input image URLs and webhooks point anywhere: a fetch that can only fail fails fast.
  # The fuzzer sends wrong credentials on purpose, all from loopback: the budget of failed checks is set out of its way.
  exec setsid env HOST=127.0.0.1 PORT="$PORT" GRPC_PORT="$GRPC_PORT" DATA_DIR="$DATA_DIR" ADMIN_TOKEN="$ADMIN_TOKEN" AUTH_FAILURE_LIMIT=1000000 \
    LOG_LEVEL=warn SIMULATED_LATENCY_MS=30 INPUT_FETCH_TIMEOUT=2s npm start >"$WORK/service.log" 2>&1
) &
SERVICE_PGID=$!

t0=$(now_ms)
until curl -fsS -o /dev/null "$BASE_URL/readyz" 2>/dev/null; do
  kill -0 "$SERVICE_PGID" 2>/dev/null || die "the service exited: $(tail -20 "$WORK/service.log")"
  (( $(now_ms) - t0 < 120000 )) || die "the service was not ready within 120 s"
  sleep 0.2
done
log "ready in $(elapsed "$t0") s"

json_field() { "$PY" -c "import json, sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }
admin_post() { curl -fsS -X POST "$BASE_URL$1" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' -d "$2"; }
ACCOUNT=$(admin_post /admin/v1/accounts '{"name":"fuzz","balance":"1000.00"}' | json_field account_id)
KEY_JSON=$(admin_post "/admin/v1/accounts/$ACCOUNT/keys" '{"models":["*","aimodel-3.1-flash-lite-image"]}')
API_KEY=$(json_field api_key <<<"$KEY_JSON")
KEY_ID=$(json_field key_id <<<"$KEY_JSON")

export SCHEMATHESIS_HOOKS="$REPO_DIR/test/support/schemathesis_hooks.py"
export FUZZ_BASE_URL="$BASE_URL" FUZZ_API_KEY="$API_KEY" FUZZ_KEY_ID="$KEY_ID" FUZZ_ADMIN_TOKEN="$ADMIN_TOKEN"
export FUZZ_JOURNAL="$WORK/journal.jsonl" FUZZ_SQLITE_DB="$DATA_DIR/service.db"

log "schemathesis: $MAX_EXAMPLES examples per operation, seed $SEED"
status=0
"$ST" --config-file "$REPO_DIR/test/support/schemathesis.toml" run "$BASE_URL/openapi.json" \
  --max-examples "$MAX_EXAMPLES" --seed "$SEED" ${FUZZ_MAX_TIME:+--max-time "$FUZZ_MAX_TIME"} \
  --report junit,har --report-dir "$WORK/reports" "$@" || status=$?

log "replaying the balances"
"$PY" "$REPO_DIR/test/support/schemathesis_ledger.py" "$BASE_URL" "$ADMIN_TOKEN" "$API_KEY" "$ACCOUNT" "1000.00" "$FUZZ_JOURNAL" || status=1

if (( status == 0 )); then log "no findings (seed $SEED)"; else log "FINDINGS (seed $SEED): see above and $WORK/reports"; fi
exit "$status"
