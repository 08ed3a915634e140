#!/usr/bin/env bash
# make test-compose: the docker compose demo, run for real and checked from
# outside (lab/compose). It makes sure a Docker engine and compose
# v2 are there (deploy/compose/engine.sh), that the Dockerfiles' base images
# are (deploy/compose/images.sh: pulled, or built from Debian packages where
# no registry answers), runs the test, and tears down what it started: the
# compose project (down --volumes) and dockerd, if it started it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
GO=${GO:-go}
log() { printf 'test-compose: %s\n' "$*" >&2; }

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-relaytest$$}
files=docker-compose.yml
cleanup() {
	local rc=$?
	if [ -n "${DOCKER_HOST:-}" ]; then
		docker compose -p "$COMPOSE_PROJECT_NAME" --profile cluster --profile observability \
			$(printf -- '-f %s ' ${files//:/ }) down --volumes --remove-orphans --timeout 10 >/dev/null 2>&1 || true
	fi
	deploy/compose/engine.sh down || true
	exit "$rc"
}
trap cleanup EXIT

start=$(date +%s)
DOCKER_HOST=$(deploy/compose/engine.sh up)
export DOCKER_HOST
docker compose version >&2
stand_in=$(deploy/compose/images.sh)

# The demo's broker image downloads the delayed-message plugin: where no
# registry answers, the stand-in broker images.sh built runs instead. It
# has the plugin, so the demo runs with its own DELAY_BACKEND; built
# without it (its file missing, never under CI), it needs levels.
broker=$(sed -n 's/^FROM \(rabbitmq:[^ ]*\).*/\1/p' deploy/rabbitmq/Dockerfile | head -n1)
if docker image inspect "$broker" >/dev/null 2>&1 || timeout 60 docker pull -q "$broker" >/dev/null 2>&1; then
	log "broker: deploy/rabbitmq on $broker"
else
	files=docker-compose.yml:deploy/compose/offline.yml
	export RELAY_STAND_IN_BROKER=$stand_in
	case $stand_in in
	*-delayed)
		log "broker: no registry answers for $broker; $stand_in (deploy/compose/offline.yml), with the delayed-message plugin"
		;;
	*)
		log "broker: no registry answers for $broker; $stand_in (deploy/compose/offline.yml), without the delayed-message plugin: DELAY_BACKEND=levels"
		export DELAY_BACKEND=levels
		;;
	esac
fi
log "engine and images ready after $(($(date +%s) - start)) s"

RELAY_COMPOSE_FILES=$files "$GO" -C lab test -count=1 -tags compose -timeout "${TIMEOUT:-40m}" -v ./compose/
log "done after $(($(date +%s) - start)) s"
