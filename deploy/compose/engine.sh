#!/usr/bin/env bash
# A Docker engine and the compose v2 and buildx CLI plugins for
# make test-compose, on a Debian bookworm machine:
#
#   deploy/compose/engine.sh up     install what is missing, start dockerd on
#                                   its own socket if none answers there; prints
#                                   the DOCKER_HOST to use
#   deploy/compose/engine.sh down   stop the dockerd that up started (only that)
#
# dockerd comes from Debian's docker.io package. The compose and buildx
# plugins come from Debian's docker-compose and docker-buildx packages of
# suite sid (bookworm's docker-compose is compose v1): their static binaries
# run on bookworm. They are fetched with apt into a private package list, so
# the machine's own sources are left as they are.
set -euo pipefail

SOCK_DIR=${RELAY_DOCKER_RUN:-/run/relay-docker}
DATA_ROOT=${RELAY_DOCKER_DATA:-/var/lib/relay/docker}
CACHE=${RELAY_CACHE:-/var/cache/relay}
HOST="unix://$SOCK_DIR/docker.sock"
PLUGINS=/usr/local/lib/docker/cli-plugins
log() { printf 'engine: %s\n' "$*" >&2; }

answers() { DOCKER_HOST=$HOST docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

install_engine() {
	if command -v dockerd >/dev/null && command -v containerd >/dev/null && command -v docker >/dev/null; then
		return
	fi
	log "installing docker.io (dockerd, containerd, runc) from Debian"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null
}

# sid_plugin PACKAGE BINARY puts BINARY from sid's PACKAGE in $PLUGINS.
sid_plugin() {
	local pkg=$1 bin=$2 apt_dir=$CACHE/apt-sid
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$PLUGINS"
	local opts=(-o "Dir::Etc::SourceList=$apt_dir/sid.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
		-o "Dir::Cache=$apt_dir" -o APT::Get::List-Cleanup=0)
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" >"$apt_dir/sid.list"
	if ! ls "$apt_dir/lists/"*sid*Packages* >/dev/null 2>&1; then
		log "reading sid's package list (for $pkg)"
		apt-get "${opts[@]}" update -qq
	fi
	local tmp
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get "${opts[@]}" download -qq "$pkg" >/dev/null)
	dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/root"
	install -m 0755 "$(find "$tmp/root" -type f -name "$bin" -path '*cli-plugins*' | head -n1)" "$PLUGINS/$bin"
	rm -rf "$tmp"
	log "installed $PLUGINS/$bin from sid's $pkg"
}

install_plugins() {
	docker compose version >/dev/null 2>&1 || sid_plugin docker-compose docker-compose
	docker buildx version >/dev/null 2>&1 || sid_plugin docker-buildx docker-buildx
}

start() {
	if answers; then
		log "a Docker engine answers on $HOST; using it"
		return
	fi
	mkdir -p "$SOCK_DIR" "$DATA_ROOT"
	log "starting dockerd on $HOST (data in $DATA_ROOT)"
	# dockerd starts a containerd of its own under its exec root.
	setsid dockerd --host "$HOST" --data-root "$DATA_ROOT" --exec-root "$SOCK_DIR/exec" \
		--pidfile "$SOCK_DIR/docker.pid" >"$SOCK_DIR/dockerd.log" 2>&1 </dev/null &
	echo $! >"$SOCK_DIR/started-by-relay"
	for _ in $(seq 1 120); do
		answers && return
		kill -0 "$(cat "$SOCK_DIR/started-by-relay")" 2>/dev/null || break
		sleep 0.5
	done
	log "dockerd did not answer; its log:"
	tail -n 30 "$SOCK_DIR/dockerd.log" >&2
	exit 1
}

stop() {
	local marker=$SOCK_DIR/started-by-relay
	[ -f "$marker" ] || { log "no dockerd started here; nothing to stop"; return; }
	local pid
	pid=$(cat "$marker")
	if kill -0 "$pid" 2>/dev/null; then
		log "stopping dockerd (pid $pid)"
		kill -TERM "$pid"
		for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
	fi
	rm -f "$marker"
}

case ${1:-} in
up)
	install_engine
	install_plugins
	start
	echo "$HOST"
	;;
down) stop ;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac
