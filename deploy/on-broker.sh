#!/usr/bin/env bash
# deploy/on-broker.sh VERSION COMMAND...: run COMMAND against a RabbitMQ
# VERSION node of its own (deploy/broker.sh starts it, and stops it again
# whatever happens), with AMQP_URL and MANAGEMENT_URL set to that node.
# make bench BROKER=4.3 and make bench-peers BROKER=4.3 run through it.
# RELAY_BROKER_INSTANCE picks the node (see deploy/broker.sh); the machine's
# own broker is never touched.
set -uo pipefail

[ $# -ge 2 ] || { echo "usage: deploy/on-broker.sh VERSION COMMAND..." >&2; exit 2; }
version=$1
shift
broker=$(dirname "$0")/broker.sh # COMMAND runs where it was called from

cleanup() { "$broker" down "$version"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

"$broker" up "$version" || exit 1
AMQP_URL=$("$broker" url "$version") || exit 1
MANAGEMENT_URL=$("$broker" mgmt "$version") || exit 1
export AMQP_URL MANAGEMENT_URL
"$@"
