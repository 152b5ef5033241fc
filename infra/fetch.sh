#!/usr/bin/env bash
# Copy the server jars from Maven Central into <repo>/.infra/{kafka,cassandra}/lib.
# Idempotent: a lib dir is (re)fetched only when it is missing, incomplete (no stamp
# from a finished copy) or older than its pom.xml (stamp holds the pom's sha256).
# Usage: infra/fetch.sh [kafka] [cassandra]   (default: both)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

fetch_one() {
  local name=$1
  local pom="$INFRA_DIR/$name/pom.xml"
  local lib="$STATE_DIR/$name/lib"
  local stamp="$lib/.fetched"
  local want
  lock "$name-jars"
  want=$(sha256sum "$pom" | cut -d' ' -f1)
  if [[ -f $stamp && "$(<"$stamp")" == "$want" ]]; then
    log "$name jars already fetched ($(find "$lib" -name '*.jar' | wc -l) jars)"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (need Maven 3.6+ and Java 17)"
  local tmp="$lib.partial"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  log "fetching $name jars with Maven into $lib ..."
  local t0; t0=$(now_ms)
  # -q keeps the log short; errors still print. The output dir must be absolute.
  # Maven 3.8 still emits bare colour resets with -B -q: strip escape sequences.
  mvn -B -q -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
  printf '%s\n' "$want" > "$tmp/.fetched"
  rm -rf "$lib"
  mv "$tmp" "$lib"
  log "$name: $(find "$lib" -name '*.jar' | wc -l) jars in $(elapsed "$t0") s"
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(kafka cassandra)
for t in "${targets[@]}"; do
  case $t in
    kafka|cassandra) fetch_one "$t" ;;
    *) die "unknown target '$t' (expected kafka or cassandra)" ;;
  esac
done
