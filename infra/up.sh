#!/usr/bin/env bash
# Start a single-node Apache Kafka 3.9 (KRaft) and Apache Cassandra 5.0 on 127.0.0.1,
# without Docker, and wait until both answer real client requests.
#
#   Kafka      127.0.0.1:9092 (controller 127.0.0.1:9093)    data+log: .infra/run/kafka/
#   Cassandra  127.0.0.1:9042 (storage     127.0.0.1:7000)    data+log: .infra/run/cassandra/
#
# A server whose port already answers is left alone (only checked). Both start in
# parallel. Jars are fetched first if needed (infra/fetch.sh). Stop with infra/down.sh.
# Env: KAFKA_TIMEOUT (default 120 s), CASSANDRA_TIMEOUT (default 180 s),
#      INFRA_ONLY=kafka|cassandra to handle just one of them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

KAFKA_TIMEOUT="${KAFKA_TIMEOUT:-120}"
CASSANDRA_TIMEOUT="${CASSANDRA_TIMEOUT:-180}"
ONLY="${INFRA_ONLY:-}"

want() { [[ -z $ONLY || $ONLY == "$1" ]]; }

# While this runs, STARTING names its pid: infra/with-servers.sh waits for it to end, so a run started
# while CI is still bringing the servers up uses them instead of starting its own. (Not a lock: the
# servers this starts would inherit its file descriptor and hold it for as long as they run.)
mkdir -p "$RUN_DIR"
echo $$ >"$SERVERS_STARTING"
trap 'rm -f "$SERVERS_STARTING"' EXIT

command -v java >/dev/null || die "java not found (need Java 17)"
command -v node >/dev/null || die "node not found"
for m in kafkajs cassandra-driver; do
  [[ -d $REPO_DIR/node_modules/$m ]] || die "node_modules/$m missing: run npm ci first"
done

targets=()
want kafka && targets+=(kafka)
want cassandra && targets+=(cassandra)
[[ ${#targets[@]} -gt 0 ]] || die "INFRA_ONLY must be kafka or cassandra"
bash "$INFRA_DIR/fetch.sh" "${targets[@]}"

# Start the command given as arguments in its own session (so Ctrl-C or the end of
# this script does not take it down), detached from stdin, appending to a log file.
# The pid file is written by the process itself just before it execs java.
spawn() {
  local pidfile=$1 logfile=$2; shift 2
  rm -f "$pidfile"
  # shellcheck disable=SC2016  # $$ and $@ belong to the inner bash
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "$@" </dev/null >>"$logfile" 2>&1 &
  local i
  for i in $(seq 1 50); do
    [[ -s $pidfile ]] && return 0
    sleep 0.1
  done
  die "process for $pidfile did not record its pid"
}

# Keep the previous run's log next to the new one.
rotate_log() { [[ -f $1 ]] && mv -f "$1" "$1.prev"; return 0; }

start_kafka() {
  local data="$KAFKA_RUN/data" props="$KAFKA_RUN/server.properties" logf="$KAFKA_RUN/kafka.log"
  mkdir -p "$data"
  sed "s|@LOG_DIR@|$data|g" "$INFRA_DIR/kafka/server.properties.in" > "$props"
  rotate_log "$logf"
  local cp="$KAFKA_LIB/*"
  local log4j="-Dlog4j.configuration=file:$INFRA_DIR/kafka/log4j.properties"
  if [[ ! -f $data/meta.properties ]]; then
    log "kafka: formatting KRaft storage in $data (cluster id $KAFKA_CLUSTER_ID)"
    java -Xmx256m "$log4j" -cp "$cp" kafka.tools.StorageTool format \
      --config "$props" --cluster-id "$KAFKA_CLUSTER_ID" --ignore-formatted >>"$logf" 2>&1 \
      || { tail -n 50 "$logf" >&2; die "kafka: storage format failed"; }
  fi
  log "kafka: starting (heap 512m), log $logf"
  spawn "$KAFKA_RUN/kafka.pid" "$logf" \
    java -Xms512m -Xmx512m \
      -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
      -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true \
      "$log4j" -Dkafka.logs.dir="$KAFKA_RUN" \
      -cp "$cp" kafka.Kafka "$props"
}

start_cassandra() {
  local data="$CASSANDRA_RUN/data" logf="$CASSANDRA_RUN/cassandra.log"
  mkdir -p "$data" "$CASSANDRA_RUN/tmp"
  rotate_log "$logf"
  local jamms=("$CASSANDRA_LIB"/jamm-*.jar)
  local jamm=${jamms[0]}
  [[ -f $jamm ]] || die "cassandra: jamm jar missing from $CASSANDRA_LIB"
  # JPMS opens/exports Cassandra 5.0 needs on Java 17 (conf/jvm17-server.options).
  local jpms=(
    -Djdk.attach.allowAttachSelf=true
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
    --add-exports java.base/sun.nio.ch=ALL-UNNAMED
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.management/com.sun.jmx.remote.security=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED
    --add-exports java.base/java.lang.ref=ALL-UNNAMED
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
    --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED
  )
  # Only a full JDK has jdk.attach / jdk.compiler (bin/cassandra.in.sh does the same).
  if [[ -x "$(dirname "$(readlink -f "$(command -v java)")")/javac" ]]; then
    jpms+=(
      --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
      --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
      --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
    )
  fi
  # One node has no peer to tell it is stopping: shutdown_announce_in_ms=0 drops a 2 s wait from every down.sh.
  log "cassandra: starting (heap 2g), log $logf"
  spawn "$CASSANDRA_RUN/cassandra.pid" "$logf" \
    java -Xms2g -Xmx2g -Xss256k \
      -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 \
      -XX:G1HeapRegionSize=16m -XX:MaxGCPauseMillis=300 \
      -XX:+UseTLAB -XX:+ResizeTLAB -XX:+PerfDisableSharedMem \
      -XX:+HeapDumpOnOutOfMemoryError -XX:HeapDumpPath="$CASSANDRA_RUN" -XX:+CrashOnOutOfMemoryError \
      -Djava.net.preferIPv4Stack=true -Djava.awt.headless=true \
      -Dchronicle.analytics.disable=true \
      -Dio.netty.tryReflectionSetAccessible=true \
      -Dio.netty.allocator.useCacheForAllThreads=true -Dio.netty.allocator.maxOrder=11 \
      -Djna.tmpdir="$CASSANDRA_RUN/tmp" \
      "${jpms[@]}" \
      -javaagent:"$jamm" \
      -Dcassandra.config="file://$INFRA_DIR/cassandra/cassandra.yaml" \
      -Dcassandra.storagedir="$data" \
      -Dcassandra.logdir="$CASSANDRA_RUN" \
      -Dlogback.configurationFile="$INFRA_DIR/cassandra/logback.xml" \
      -Dcassandra-foreground=yes \
      -Dcassandra.skip_wait_for_gossip_to_settle=0 \
      -Dcassandra.shutdown_announce_in_ms=0 \
      -Dcassandra.unsafesystem=true \
      -cp "$CASSANDRA_LIB/*" org.apache.cassandra.service.CassandraDaemon
}

# ensure NAME HOST PORT TIMEOUT: start NAME unless it already answers, then wait until
# a real client request succeeds. Runs in a background subshell per server.
ensure() {
  local name=$1 host=$2 port=$3 timeout=$4
  local run pidfile logf waiter pid="" t0
  case $name in
    kafka)     run=$KAFKA_RUN;     logf=$KAFKA_RUN/kafka.log;         waiter=wait-kafka.mjs ;;
    cassandra) run=$CASSANDRA_RUN; logf=$CASSANDRA_RUN/cassandra.log; waiter=wait-cassandra.mjs ;;
  esac
  pidfile="$run/$name.pid"
  mkdir -p "$run"
  t0=$(now_ms)
  if port_open "$host" "$port"; then
    log "$name: something already listens on $host:$port, leaving it alone (checking it answers)"
    pid=$(live_pid "$pidfile" || true)
  elif pid=$(live_pid "$pidfile"); then
    log "$name: pid $pid (from $pidfile) is still starting, waiting for it"
  else
    "start_$name"
    pid=$(<"$pidfile")
    log "$name: pid $pid"
  fi
  local args=(--timeout "$timeout")
  [[ -n $pid ]] && args+=(--pid "$pid")
  local key=contact; [[ $name == kafka ]] && key=brokers
  args+=("--$key" "$host:$port")
  local rc=0
  node "$INFRA_DIR/$waiter" "${args[@]}" || rc=$?
  if [[ $rc -eq 0 ]]; then
    log "$name: ready after $(elapsed "$t0") s"
    return 0
  fi
  if [[ -f $logf ]]; then
    log "$name: last 50 lines of $logf:"
    tail -n 50 "$logf" >&2
  fi
  [[ $rc -eq 2 ]] && rm -f "$pidfile"
  die "$name did not become ready (rc=$rc)"
}

t_all=$(now_ms)
pids=()
names=()
if want kafka; then
  ensure kafka "$KAFKA_HOST" "$KAFKA_PORT" "$KAFKA_TIMEOUT" & pids+=($!); names+=(kafka)
fi
if want cassandra; then
  ensure cassandra "$CASSANDRA_HOST" "$CASSANDRA_PORT" "$CASSANDRA_TIMEOUT" & pids+=($!); names+=(cassandra)
fi
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [[ ${#failed[@]} -gt 0 ]]; then
  die "not ready: ${failed[*]} (stop what did start with: bash infra/down.sh)"
fi
summary=()
want kafka && summary+=("kafka $KAFKA_HOST:$KAFKA_PORT")
want cassandra && summary+=("cassandra $CASSANDRA_HOST:$CASSANDRA_PORT (datacenter1)")
printf -v joined '%s, ' "${summary[@]}"
log "ready in $(elapsed "$t_all") s: ${joined%, }"
