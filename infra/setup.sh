#!/usr/bin/env bash
# The set-up `npm test` runs first: everything its tests drive that `npm ci` does not
# install, each one only when it is missing or not at its pinned version.
#
#   go-tools      grpc-health-probe, grpcurl, protoc-gen-go, protoc-gen-go-grpc,
#                 protoc-gen-connect-go, ghz, helm: `go install`, pinned in infra/tools.sh,
#                 into $(go env GOBIN) or $(go env GOPATH)/bin   (test/transport, test/repo)
#   proto-python  grpcio-tools, venv .infra/proto-python          (test/repo codegen, examples)
#   python-sdk    google-genai and openai, venv .infra/python-sdk (test/transport/*-sdk-python)
#   schemathesis  Schemathesis, venv .infra/schemathesis           (test/transport/openapi-fuzz)
#   jars          Kafka and Cassandra, Maven Central, .infra/{kafka,cassandra}/lib (test:real, test:outage)
#   system        Debian's chromium (/usr/bin/chromium, test/system) and prometheus
#                 (promtool, test/repo/ops-files, the /metrics checks): apt-get, only as root
#
# They do not depend on each other, so they run side by side (`go install` mostly
# waits on the CPU, pip, Maven and apt on the network); each one's output is
# printed whole when it ends, with its time. A second run finds everything in place
# and takes a few seconds; the versions are pinned in infra/tools.sh and
# infra/*.requirements.txt, the jars in infra/{kafka,cassandra}/pom.xml.
#
# Not root and chromium or promtool missing: prints the apt-get command to run and
# goes on (the tests that need them fail saying what is missing). Any other install
# that fails stops the set-up, and `npm test` with it.
# Needs only what a machine of CI's kind has: bash 5.1+ (wait -n -p), Go 1.26+,
# python3 with venv, Java 17 and Maven, and (for the system packages) apt-get.
# Usage: infra/setup.sh [task...]   (default: all of the above)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ALL=(go-tools proto-python python-sdk schemathesis jars system)
declare -A WHAT=(
  [go-tools]="Go tools (go install, pinned): grpc-health-probe grpcurl protoc-gen-go protoc-gen-go-grpc protoc-gen-connect-go ghz helm"
  [proto-python]="grpcio-tools (pip, pinned) in .infra/proto-python"
  [python-sdk]="google-genai and openai (pip, pinned) in .infra/python-sdk"
  [schemathesis]="Schemathesis (pip, pinned) in .infra/schemathesis"
  [jars]="Kafka and Cassandra jars (Maven Central) in .infra/{kafka,cassandra}/lib"
  [system]="Debian packages chromium and prometheus (promtool), apt-get when root and missing"
)

# Debian's chromium and prometheus, when missing. The browser tests run /usr/bin/chromium.
system_packages() {
  local missing=() t0
  [[ -x /usr/bin/chromium ]] || missing+=(chromium)
  command -v promtool >/dev/null || missing+=(prometheus)
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "chromium and promtool already installed: /usr/bin/chromium, $(command -v promtool)"
    return 0
  fi
  local cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $EUID -ne 0 ]]; then
    log "NOT INSTALLED: ${missing[*]} (not root, so not installed here). Run: sudo sh -c '$cmd'"
    log "until then the tests that need them fail, each saying what is missing"
    return 0
  fi
  command -v apt-get >/dev/null \
    || { log "NOT INSTALLED: ${missing[*]}: no apt-get here; install Chromium at /usr/bin/chromium and promtool yourself"; return 0; }
  t0=$(now_ms)
  log "installing ${missing[*]}: $cmd"
  # Another apt-get on the machine holds dpkg's lock: wait for it rather than fail.
  apt-get update -q -o DPkg::Lock::Timeout=300
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}"
  [[ -x /usr/bin/chromium ]] || die "apt-get finished but /usr/bin/chromium is missing"
  command -v promtool >/dev/null || die "apt-get finished but promtool is missing"
  log "${missing[*]} installed in $(elapsed "$t0") s"
}

run_task() {
  case $1 in
    go-tools)     bash "$INFRA_DIR/tools.sh" go ;;
    proto-python) bash "$INFRA_DIR/tools.sh" python ;;
    python-sdk)   bash "$INFRA_DIR/python-sdk.sh" ;;
    schemathesis) bash "$INFRA_DIR/schemathesis.sh" ;;
    jars)         bash "$INFRA_DIR/fetch.sh" kafka cassandra ;;
    system)       system_packages ;;
  esac
}

tasks=("$@")
[[ ${#tasks[@]} -gt 0 ]] || tasks=("${ALL[@]}")
for task in "${tasks[@]}"; do
  [[ -v "WHAT[$task]" ]] || die "unknown task '$task' (expected: ${ALL[*]})"
done

LOGS=$(mktemp -d)
declare -A names=() t0s=()
cleanup() {
  local pid
  for pid in "${!names[@]}"; do kill -- "$pid" 2>/dev/null || true; done
  rm -rf "$LOGS"
}
trap cleanup EXIT

t_all=$(now_ms)
log "setting up what the tests need, side by side (infra/setup.sh; each is skipped when already there):"
for task in "${tasks[@]}"; do
  printf '  %-13s %s\n' "$task" "${WHAT[$task]}" >&2
  ( run_task "$task" ) >"$LOGS/$task.log" 2>&1 &
  names[$!]=$task
  t0s[$task]=$(now_ms)
done

failed=() summary=()
while [[ ${#names[@]} -gt 0 ]]; do
  rc=0
  wait -n -p pid "${!names[@]}" || rc=$?
  task=${names[$pid]}
  unset "names[$pid]"
  took=$(elapsed "${t0s[$task]}")
  echo "::: $task (exit $rc, $took s)" >&2
  cat "$LOGS/$task.log" >&2
  summary+=("$task ${took}s")
  [[ $rc -eq 0 ]] || failed+=("$task")
done

printf -v joined '%s, ' "${summary[@]}"
log "set-up finished in $(elapsed "$t_all") s (${joined%, })"
# What was left out (not root) is repeated here, where it is seen.
grep -h "NOT INSTALLED" "$LOGS"/*.log >&2 || true
[[ ${#failed[@]} -eq 0 ]] || die "set-up failed: ${failed[*]} (its output is above; rerun with: bash infra/setup.sh ${failed[*]})"
