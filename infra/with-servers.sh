#!/usr/bin/env bash
# Runs a command with Kafka and Cassandra available:
#   infra/with-servers.sh <command> [args...]
# Servers that already answer are used as they are; the ones this script has to
# start are stopped again when the command ends (whatever its exit status), so a
# developer's own `npm run infra:up` servers stay up and a fresh machine is left clean.
# Exports KAFKA_BROKERS and CASSANDRA_CONTACT_POINTS for the command, and the single-node replication
# (CASSANDRA_REPLICATION_FACTOR, KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS: 1 unless set) that
# infra/'s one node and one broker take; the service's defaults ask for 3 replicas.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[[ $# -gt 0 ]] || die "usage: infra/with-servers.sh <command> [args...]"

# Servers being brought up right now (by an infra/up.sh that is still running) are waited for.
wait_for_servers_starting
started=()
port_open "$KAFKA_HOST" "$KAFKA_PORT" || started+=(kafka)
port_open "$CASSANDRA_HOST" "$CASSANDRA_PORT" || started+=(cassandra)

cleanup() {
  local name
  for name in "${started[@]}"; do INFRA_ONLY=$name bash "$INFRA_DIR/down.sh" || true; done
}
trap cleanup EXIT

if [[ ${#started[@]} -gt 0 ]]; then
  log "starting ${started[*]} for this run (stopped again afterwards)"
  bash "$INFRA_DIR/up.sh"
fi

export KAFKA_BROKERS="${KAFKA_BROKERS:-$KAFKA_HOST:$KAFKA_PORT}"
export CASSANDRA_CONTACT_POINTS="${CASSANDRA_CONTACT_POINTS:-$CASSANDRA_HOST:$CASSANDRA_PORT}"
export CASSANDRA_REPLICATION_FACTOR="${CASSANDRA_REPLICATION_FACTOR:-1}"
export KAFKA_REPLICATION_FACTOR="${KAFKA_REPLICATION_FACTOR:-1}"
export KAFKA_MIN_INSYNC_REPLICAS="${KAFKA_MIN_INSYNC_REPLICAS:-1}"
"$@"
