#!/usr/bin/env bash
# Stop the Kafka and Cassandra started by infra/up.sh, by their recorded pids:
# SIGTERM, wait (Kafka 30 s, Cassandra 60 s), then SIGKILL. Removes the pid files.
#   infra/down.sh          keep data (the next up.sh restarts on it)
#   infra/down.sh --wipe   also delete data and logs under .infra/run/ (jars stay)
# A server this script did not start (no pid file) is left alone.
# INFRA_ONLY=kafka|cassandra stops just one of them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

wipe=false
for arg in "$@"; do
  case $arg in
    --wipe) wipe=true ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) die "unknown argument '$arg' (only --wipe)" ;;
  esac
done

# stop NAME PIDFILE GRACE_SECONDS MAIN_CLASS
stop() {
  local name=$1 pidfile=$2 grace=$3 main=$4 pid
  if ! pid=$(live_pid "$pidfile"); then
    [[ -f $pidfile ]] && log "$name: stale pid file, process already gone"
    [[ -f $pidfile ]] || log "$name: not running (no pid file)"
    rm -f "$pidfile"
    return 0
  fi
  # Never signal a recycled pid that belongs to something else.
  if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$main"; then
    log "$name: pid $pid is not $main any more, removing stale pid file"
    rm -f "$pidfile"
    return 0
  fi
  local t0; t0=$(now_ms)
  log "$name: stopping pid $pid (TERM, up to ${grace}s)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$(( $(date +%s) + grace ))
  while kill -0 "$pid" 2>/dev/null && (( $(date +%s) < deadline )); do
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name: still alive after ${grace}s, sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$pidfile"
  log "$name: stopped in $(elapsed "$t0") s"
}

ONLY="${INFRA_ONLY:-}"
want() { [[ -z $ONLY || $ONLY == "$1" ]]; }
pids=()
if want kafka; then
  stop kafka "$KAFKA_RUN/kafka.pid" 30 kafka.Kafka &
  pids+=($!)
fi
if want cassandra; then
  stop cassandra "$CASSANDRA_RUN/cassandra.pid" 60 org.apache.cassandra.service.CassandraDaemon &
  pids+=($!)
fi
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done

if $wipe; then
  log "wiping $KAFKA_RUN and $CASSANDRA_RUN"
  rm -rf "$KAFKA_RUN" "$CASSANDRA_RUN"
fi
exit "$rc"
