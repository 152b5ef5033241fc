# shellcheck shell=bash disable=SC2034
# Shared settings for infra/*.sh. Source it; do not run it.
# Every path is absolute and derived from this file's location, so the scripts
# work from any current directory.

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$INFRA_DIR/.." && pwd)"
STATE_DIR="$REPO_DIR/.infra"            # ignored by git: jars, data, logs, pid files
RUN_DIR="$STATE_DIR/run"

KAFKA_LIB="$STATE_DIR/kafka/lib"
CASSANDRA_LIB="$STATE_DIR/cassandra/lib"
KAFKA_RUN="$RUN_DIR/kafka"
CASSANDRA_RUN="$RUN_DIR/cassandra"

KAFKA_HOST=127.0.0.1
KAFKA_PORT=9092
CASSANDRA_HOST=127.0.0.1
CASSANDRA_PORT=9042

# Fixed KRaft cluster id (base64url of 16 bytes), so `format --ignore-formatted`
# is idempotent across restarts.
KAFKA_CLUSTER_ID="${KAFKA_CLUSTER_ID:-4L6g3nShT-eMCtK--X86sw}"

log() { printf '[infra %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# True when something accepts TCP connections on host:port (bash /dev/tcp, no nc needed).
port_open() {
  local host=$1 port=$2
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# Pid recorded in a pid file, if that process is still alive.
live_pid() {
  local pidfile=$1 pid
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && { echo "$pid"; return 0; }
  return 1
}

now_ms() { date +%s%3N; }

# The pid of an infra/up.sh bringing the servers up right now (removed when it ends).
SERVERS_STARTING="$RUN_DIR/servers.starting"

# Waits (at most 5 minutes) for an infra/up.sh that is still bringing the servers up.
wait_for_servers_starting() {
  local pid deadline=$(( $(date +%s) + 300 ))
  pid=$(cat "$SERVERS_STARTING" 2>/dev/null) || return 0
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  log "servers: infra/up.sh (pid $pid) is starting them, waiting for it"
  while kill -0 "$pid" 2>/dev/null && [[ -f $SERVERS_STARTING ]]; do
    (( $(date +%s) < deadline )) || die "servers: infra/up.sh (pid $pid) still starting them after 5 minutes"
    sleep 1
  done
}

# lock NAME: holds $STATE_DIR/.lock-NAME (flock) until the calling (sub)shell exits, so
# two installs of the same thing (npm test's set-up beside .ci/run's infra/up.sh, or two
# terminals) take turns instead of writing the same directory at once; the second one
# then finds the first one's result and skips. No-op without flock (util-linux).
lock() {
  command -v flock >/dev/null || return 0
  mkdir -p "$STATE_DIR"
  local fd
  exec {fd}>"$STATE_DIR/.lock-$1"
  flock -n "$fd" && return 0
  log "$1: another process holds it (an install, or the servers starting), waiting for it"
  flock "$fd"
}

# Milliseconds since a start time, printed as seconds with one decimal.
elapsed() {
  local ms=$(( $(now_ms) - $1 ))
  printf '%d.%d' $(( ms / 1000 )) $(( ms % 1000 / 100 ))
}

# python_venv NAME REQUIREMENTS CHECK: a virtual environment of its own,
# $STATE_DIR/NAME (ignored by git), holding exactly the pinned REQUIREMENTS;
# CHECK is Python run in it once installed (imports, prints versions).
# Idempotent: when the venv already holds those requirements nothing is downloaded.
python_venv() {
  local name=$1 requirements=$2 check=$3
  local venv="$STATE_DIR/$name" stamp="$STATE_DIR/$name/.requirements" t0
  command -v python3 >/dev/null || die "python3 not found (install Python 3.9+ with its venv module)"
  lock "$name"
  if [[ -x $venv/bin/python && -f $stamp ]] && cmp -s "$requirements" "$stamp"; then
    log "$name venv up to date: $venv"
    return 0
  fi
  t0=$(now_ms)
  log "creating $venv and installing $(grep -v '^#' "$requirements" | xargs) ..."
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
  "$venv/bin/python" -c "$check" >&2
  cp "$requirements" "$stamp"
  log "$name installed in $(elapsed "$t0") s: $venv/bin/python"
}
