#!/usr/bin/env bash
# npm test: the type checks and the compiled suite (npm run build:tests), then the embedded half and the outage
# files side by side, then the real half.
#
# Why side by side: the embedded half never touches Kafka or Cassandra (its Cassandra and Kafka adapter tests skip
# without CASSANDRA_CONTACT_POINTS and KAFKA_BROKERS, which only infra/with-servers.sh exports), and the outage files
# spend most of their four minutes waiting on the servers they stop and start, one file at a time. The real half
# uses those servers, so it comes after both. The outage files' output is printed whole once they end.
set -uo pipefail
cd "$(dirname "$0")/.."

npm run build:tests || exit 1
node_modules/.bin/tsc --noEmit -p panel || exit 1

outage_log=$(mktemp)
# A process group of its own, so that an interrupted run takes the outage files' servers' users down with it.
setsid npm run test:outage >"$outage_log" 2>&1 &
outage=$!
trap 'kill -- -"$outage" 2>/dev/null; rm -f "$outage_log"' EXIT

npm run test:embedded
embedded=$?
wait "$outage"
outage_rc=$?
echo "::: npm run test:outage, run beside test:embedded (exit $outage_rc)"
cat "$outage_log"
[[ $embedded -eq 0 && $outage_rc -eq 0 ]] || exit 1

npm run test:real
