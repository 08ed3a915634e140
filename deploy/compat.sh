#!/usr/bin/env bash
# deploy/compat.sh VERSION...: the integration suites against RabbitMQ
# nodes of other versions (deploy/broker.sh starts each, and stops it
# again whatever happens), one version after the other, each result named.
# The machine's own broker (make test) is never touched. GOTESTFLAGS adds
# flags to go test (say -race, or -run to narrow the run).
#
# Each node must report its version (4.0: 4.0.x), or its suites do not run
# and the version fails. The suites run with RELAY_BROKER=VERSION and
# RELAY_EXPECT_BACKENDS, the delay backends the node must run
# (deploy/broker.sh backends: plugin on 4.0, native on 4.3), so a test of
# such a backend fails there instead of skipping (internal/testenv.Lacks).
# The whole -v log goes to /tmp/relay-compat-VERSION.log; the output shows
# one line per package, the failures, and the count of passed, skipped and
# failed tests with every skipped test and why (deploy/testlog.awk).
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
	local url mgmt expect rc=0
	url=$("$broker" url "$1") mgmt=$("$broker" mgmt "$1") expect=$("$broker" backends "$1")
	export AMQP_URL=$url MANAGEMENT_URL=$mgmt RELAY_BROKER=$1 RELAY_EXPECT_BACKENDS=$expect
	# shellcheck disable=SC2086
	$GO test -json -count=1 -tags integration -timeout "${TIMEOUT:-20m}" ${GOTESTFLAGS:-} ./... || rc=1
	if [ -f lab/go.mod ]; then
		# shellcheck disable=SC2086
		$GO -C lab test -json -count=1 -tags integration -timeout "${TIMEOUT:-20m}" ${GOTESTFLAGS:-} \
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
	version=$("$broker" ctl "$v" -q version 2>/dev/null)
	case "$version" in
	"$v".*) ;;
	*)
		results+=("RabbitMQ $v: FAIL (the node reports RabbitMQ ${version:-no version}, not $v.x: its suites did not run)")
		status=1
		"$broker" down "$v"
		current=
		continue
		;;
	esac
	printf '== RabbitMQ %s, delay backends whose tests must run: %s; the whole log: /tmp/relay-compat-%s.log\n' \
		"$version" "$("$broker" backends "$v")" "$v"
	summary=/tmp/relay-compat-$v.summary
	started=$(date +%s)
	suites "$v" 2>&1 | LC_ALL=C awk -v logfile="/tmp/relay-compat-$v.log" -v summary="$summary" -f deploy/testlog.awk
	rc=${PIPESTATUS[0]}
	took=$(($(date +%s) - started))
	read -r _ passed skipped failed < <(grep '^counts ' "$summary" || echo "counts ? ? ?")
	counts="$passed passed, $skipped skipped, $failed failed"
	fails=$(sed -n 's/^fail //p' "$summary" | tr '\n' ' ')
	if [ "$rc" = 0 ]; then
		results+=("RabbitMQ $version: PASS in ${took}s ($counts)")
	else
		results+=("RabbitMQ $version: FAIL in ${took}s ($counts): ${fails:-see the log above}")
		status=1
	fi
	while IFS= read -r line; do
		results+=("   --- SKIP: ${line:0:160}")
	done < <(sed -n 's/^skip //p' "$summary")
	"$broker" down "$v"
	current=
done

printf '== compat results\n'
printf '   %s\n' "${results[@]}"
exit "$status"
