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

# suites VERSION runs the integration tests on that version's node: the
# root module's, then the lab's packages that use the broker (the
# workshop's strategies, the workshop, the bench, the peers benchmark);
# it fails if either fails.
suites() {
	local url mgmt rc=0
	url=$("$broker" url "$1") mgmt=$("$broker" mgmt "$1")
	# shellcheck disable=SC2086
	AMQP_URL=$url MANAGEMENT_URL=$mgmt $GO test -count=1 -tags integration -timeout "${TIMEOUT:-20m}" ${GOTESTFLAGS:-} ./... || rc=1
	if [ -f lab/go.mod ]; then
		# shellcheck disable=SC2086
		AMQP_URL=$url MANAGEMENT_URL=$mgmt $GO -C lab test -count=1 -tags integration -timeout "${TIMEOUT:-20m}" ${GOTESTFLAGS:-} \
			./strategy/ ./workshop/ ./bench/ ./peers/ || rc=1
	fi
	return "$rc"
}

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
	suites "$v" 2>&1 | tee "/tmp/relay-compat-$v.log"
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
