#!/usr/bin/env bash
# deploy/compat.sh VERSION...: the integration suites against RabbitMQ
# nodes of other versions (deploy/broker.sh starts each, and stops it
# again whatever happens), one version after the other, each result named.
# The machine's own broker (make test) is never touched. GOTESTFLAGS adds
# flags to go test (say -race, or -run to narrow the run).
set -uo pipefail
cd "$(dirname "$0")/.."

[ $# -gt 0 ] || set -- 4.0 4.3
GO=${GO:-go}
broker=deploy/broker.sh
results=()
status=0

current=
cleanup() { [ -n "$current" ] && "$broker" down "$current"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

for v in "$@"; do
	printf '== compat: RabbitMQ %s\n' "$v"
	current=$v
	if ! "$broker" up "$v"; then
		results+=("RabbitMQ $v: FAIL (the broker did not start)")
		status=1
		continue
	fi
	version=$("$broker" ctl "$v" -q version 2>/dev/null || echo "$v")
	started=$(date +%s)
	# shellcheck disable=SC2086
	AMQP_URL=$("$broker" url "$v") MANAGEMENT_URL=$("$broker" mgmt "$v") \
		$GO test -count=1 -tags integration -timeout "${TIMEOUT:-20m}" ${GOTESTFLAGS:-} ./... 2>&1 | tee "/tmp/relay-compat-$v.log"
	rc=${PIPESTATUS[0]}
	took=$(($(date +%s) - started))
	fails=$(grep -E '^--- FAIL' "/tmp/relay-compat-$v.log" | sed 's/^--- FAIL: //; s/ (.*//' | sort -u | tr '\n' ' ')
	if [ "$rc" = 0 ]; then
		results+=("RabbitMQ $version: PASS in ${took}s")
	else
		results+=("RabbitMQ $version: FAIL in ${took}s: ${fails:-see the log above}")
		status=1
	fi
	"$broker" down "$v"
	current=
done

printf '== compat results\n'
printf '   %s\n' "${results[@]}"
exit "$status"
