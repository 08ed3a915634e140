#!/usr/bin/env bash
# deploy/broker.sh: RabbitMQ nodes of other versions beside the machine's
# own broker, for the compatibility tests. Each version runs from Debian's
# own packages in a debootstrap root (3.10 from bookworm, 4.0 from trixie,
# 4.3 from sid, each with the Erlang it needs), on loopback ports of its
# own, with an epmd of its own: the default broker (rabbit@localhost, 5672)
# is never touched. 3.10 is the default broker's own version: a node of it
# here is for a test that restarts its broker, configured as the others
# are, so the default broker is neither stopped nor changed.
#
#   deploy/broker.sh up 4.3      build the root once (cached), start a fresh node, wait until it answers
#   deploy/broker.sh down 4.3    stop the node (and, with the root's last node, its epmd and mounts)
#   deploy/broker.sh start 4.3   start the node again after a stop or a crash, keeping its data
#   deploy/broker.sh run 4.3 CMD...    up, run CMD with AMQP_URL, MANAGEMENT_URL, RELAY_BROKER=4.3
#                                and RELAY_EXPECT_BACKENDS set, then down whatever happened;
#                                exits with CMD's status
#   deploy/broker.sh backends 4.0      print the delay backends whose tests must run on the node
#                                (RELAY_EXPECT_BACKENDS): those .ci/cells names for the version
#                                (ttl and levels everywhere, plugin on 4.0, native on 4.3), less
#                                the plugin on a node that runs without it
#   deploy/broker.sh mount 4.3   build the root if missing and mount its /proc and /dev (for nodes run
#                                from the root by other means, such as the cluster test)
#   deploy/broker.sh unmount 4.3 unmount the root, unless a node of it still runs
#   deploy/broker.sh url 4.3     print the node's AMQP URL
#   deploy/broker.sh mgmt 4.3    print the node's management API URL, with credentials
#   deploy/broker.sh root 4.3    print the root's directory (built if missing)
#   deploy/broker.sh ctl 4.3 ARGS...   run rabbitmqctl against the node
#   deploy/broker.sh status      one line per version: running or not
#
# Needs root (debootstrap, chroot, mount). Roots are cached under
# RELAY_BROKER_CACHE (default /var/cache/relay/brokers); `up` and `down`
# are idempotent, and every `up` starts from an empty data directory.
# RELAY_BROKER_INSTANCE=N (1 to 9) runs another node of the same version
# beside the first, its ports N×10 higher (a test that restarts its broker
# gets one of its own). Each node keeps its configuration, data and logs in
# /var/lib/relay/NODE inside the root; the root stays mounted while any of
# its nodes runs.
#
# Each node sends again the dead letters of a quorum queue it has no
# confirm for after RELAY_BROKER_DLX_CONFIRM_TIMEOUT ms (default 30000;
# RabbitMQ's own default is 180000).
#
# The 4.0 node runs the delayed-message exchange plugin (built for 4.0.x;
# it cannot load on 4.3), from RELAY_DELAYED_PLUGIN, by default the copy in
# shared/rabbitmq-plugins/ beside the repository. Without that file the
# node runs without the plugin, with a warning; under CI=true that fails.
set -euo pipefail

CACHE=${RELAY_BROKER_CACHE:-/var/cache/relay/brokers}
MIRROR=${RELAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
repo=$(cd "$(dirname "$0")/.." && pwd)
DLX_CONFIRM_TIMEOUT=${RELAY_BROKER_DLX_CONFIRM_TIMEOUT:-30000}
DELAYED_PLUGIN=${RELAY_DELAYED_PLUGIN:-${repo%/*}/shared/rabbitmq-plugins/rabbitmq_delayed_message_exchange-4.0.7.ez}

die() { printf 'broker.sh: %s\n' "$*" >&2; exit 1; }
log() { printf 'broker.sh: %s\n' "$*" >&2; }

# settings VERSION: the suite, node name and ports of a version. Ports sit
# away from the defaults (5672, 15672, 25672, 4369) and from each other.
settings() {
	case "$1" in
	3.10)
		SUITE=bookworm NODE=relay310@localhost AMQP_PORT=5631 MGMT_PORT=15631 DIST_PORT=25631 EPMD_PORT=4331
		DELAYED=
		;;
	4.0)
		SUITE=trixie NODE=relay40@localhost AMQP_PORT=5640 MGMT_PORT=15640 DIST_PORT=25640 EPMD_PORT=4340
		DELAYED=yes
		;;
	4.3)
		SUITE=sid NODE=relay43@localhost AMQP_PORT=5643 MGMT_PORT=15643 DIST_PORT=25643 EPMD_PORT=4343
		DELAYED=
		;;
	*)
		die "unknown version ${1:-(none)}: choose 3.10, 4.0 or 4.3"
		;;
	esac
	ROOT=$CACHE/$SUITE VERSION=$1
	local n=${RELAY_BROKER_INSTANCE:-0}
	case "$n" in [0-9]) ;; *) die "RELAY_BROKER_INSTANCE=$n: want a digit 0 to 9" ;; esac
	if [ "$n" != 0 ]; then
		NODE=${NODE%@*}i$n@localhost
		AMQP_PORT=$((AMQP_PORT + 10 * n)) MGMT_PORT=$((MGMT_PORT + 10 * n)) DIST_PORT=$((DIST_PORT + 10 * n))
	fi
	# Where the node lives, inside the root.
	HOME_IN=/var/lib/relay/${NODE%@*}
}

need_root() { [ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount)"; }

# build: debootstrap the suite with rabbitmq-server, once. The root is
# built beside its final place and moved there whole, so an interrupted
# build never leaves a half root that looks cached.
build() {
	if [ -x "$ROOT/usr/sbin/rabbitmq-server" ]; then
		return
	fi
	need_root
	if ! command -v debootstrap >/dev/null 2>&1; then
		log "installing debootstrap"
		# Another install may hold apt's locks: wait for it rather than fail.
		apt-get -o DPkg::Lock::Timeout=300 update -q >&2
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q debootstrap >&2
	fi
	mkdir -p "$CACHE"
	local tmp=$ROOT.building
	unmount "$tmp"
	rm -rf "$tmp"
	log "building a $SUITE root with rabbitmq-server in $ROOT (about a minute)"
	debootstrap --variant=minbase --include=rabbitmq-server "$SUITE" "$tmp" "$MIRROR" >"$CACHE/$SUITE.debootstrap.log" 2>&1 ||
		{ tail -20 "$CACHE/$SUITE.debootstrap.log" >&2; die "debootstrap $SUITE failed (log: $CACHE/$SUITE.debootstrap.log)"; }
	mv "$tmp" "$ROOT"
	log "built $(chroot "$ROOT" dpkg-query -W -f '${Version}' rabbitmq-server) in $ROOT"
}

mounted() { grep -q " $1 " /proc/mounts; }

mount_root() {
	mounted "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
	mounted "$ROOT/dev" || mount --bind /dev "$ROOT/dev"
	cp /etc/hosts "$ROOT/etc/hosts"
}

# unmount DIR: undo mount_root, lazily if something still holds a mount.
unmount() {
	local m
	for m in "$1/dev" "$1/proc"; do
		if mounted "$m"; then
			umount "$m" 2>/dev/null || umount -l "$m"
		fi
	done
}

# in_root CMD...: run a command in the root with the node's environment.
# The nodes of a version share one epmd, on the version's own port.
in_root() {
	chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq LANG=C.UTF-8 \
		ERL_EPMD_PORT="$EPMD_PORT" ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_NODENAME="$NODE" \
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$AMQP_PORT" RABBITMQ_DIST_PORT="$DIST_PORT" \
		RABBITMQ_CONF_ENV_FILE="$HOME_IN/rabbitmq-env.conf" RABBITMQ_CONFIG_FILE="$HOME_IN/rabbitmq.conf" \
		RABBITMQ_ADVANCED_CONFIG_FILE="$HOME_IN/advanced.config" RABBITMQ_ENABLED_PLUGINS_FILE="$HOME_IN/enabled_plugins" RABBITMQ_MNESIA_BASE="$HOME_IN/mnesia" \
		RABBITMQ_LOG_BASE="$HOME_IN/log" "$@"
}

configure() {
	local dir=$ROOT$HOME_IN plugins=rabbitmq_management own
	mkdir -p "$dir/log"
	: >"$dir/rabbitmq-env.conf"
	printf '%s\n' "listeners.tcp.default = 127.0.0.1:$AMQP_PORT" \
		"management.tcp.ip = 127.0.0.1" "management.tcp.port = $MGMT_PORT" >"$dir/rabbitmq.conf"
	# A quorum queue's dead-letter worker sends again what it has no
	# confirm for, or found no route for, after this long (RabbitMQ's
	# default is 180000 ms): after a restart it can hold what expired
	# while the node was down that long (docs/guarantees.md).
	printf '[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, %d}]}].\n' "$DLX_CONFIRM_TIMEOUT" >"$dir/advanced.config"
	if [ -n "$DELAYED" ] && delayed_plugin; then
		# The plugin in a directory of its own, after the broker's own
		# plugins on the node's plugin path.
		own=$(cd "$ROOT" && ls -d usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins | head -1)
		[ -n "$own" ] || die "no plugins directory of rabbitmq-server in $ROOT"
		mkdir -p "$dir/plugins"
		cp "$DELAYED_PLUGIN" "$dir/plugins/"
		echo "PLUGINS_DIR=/$own:$HOME_IN/plugins" >"$dir/rabbitmq-env.conf"
		plugins=$plugins,rabbitmq_delayed_message_exchange
	fi
	echo "[$plugins]." >"$dir/enabled_plugins"
}

# delayed_plugin: whether the delayed-message plugin's file is there. Its
# absence is a warning, and under CI=true an error: CI runs the plugin
# backend's tests on the 4.0 node.
delayed_plugin() {
	[ -f "$DELAYED_PLUGIN" ] && return 0
	local why="no delayed-message plugin at $DELAYED_PLUGIN (set RELAY_DELAYED_PLUGIN to the .ez of shared/rabbitmq-plugins/)"
	[ "${CI:-}" != true ] || die "$why: under CI=true the $VERSION node must run the plugin backend's tests"
	log "warning: $why: $NODE runs without the plugin, and the plugin backend's tests skip on it"
	return 1
}

# runs_delayed: whether the node is configured with the delayed-message
# plugin (up decided it).
runs_delayed() { grep -q rabbitmq_delayed_message_exchange "$ROOT$HOME_IN/enabled_plugins" 2>/dev/null; }

# backends: the delay backends whose tests must run on the node, for
# RELAY_EXPECT_BACKENDS (internal/testenv reads it).
# They are the ones .ci/cells names for the version, less the plugin on a
# node that runs without it (its file was missing, outside CI).
backends() {
	local b
	b=$(awk -v v="$VERSION" '$1 == v { for (i = 3; i <= NF; i++) printf "%s%s", (i > 3 ? " " : ""), $i }' "$repo/.ci/cells")
	[ -n "$b" ] || die "$repo/.ci/cells names no delay backends for RabbitMQ $VERSION"
	if ! runs_delayed; then
		b=$(echo "$b" | tr ' ' '\n' | grep -vx plugin | tr '\n' ' ' | sed 's/ $//')
	fi
	echo "$b"
}

# check_delayed: a node configured with the plugin has the exchange type.
check_delayed() {
	runs_delayed || return 0
	if in_root rabbitmqctl -q -n "$NODE" eval "rabbit_registry:lookup_module(exchange, 'x-delayed-message')." 2>&1 | grep -q '^{ok,'; then
		log "$NODE runs the delayed-message plugin ($(basename "$DELAYED_PLUGIN"))"
		return 0
	fi
	tail -30 "$ROOT$HOME_IN"/log/*.log >&2 2>/dev/null || true
	down
	die "$NODE did not load the delayed-message plugin (log: $ROOT$HOME_IN/log)"
}

answers() { in_root rabbitmq-diagnostics -q -n "$NODE" check_port_connectivity >/dev/null 2>&1; }

up() {
	need_root
	build
	mount_root
	if answers; then
		log "$NODE already running: $(url)"
		return
	fi
	# Every up starts from nothing: queues a test left behind on an earlier
	# run must not meet the next one.
	rm -rf "${ROOT:?}$HOME_IN"
	configure
	start
}

# start: start the node from what its directory holds (configuration and
# data), and wait until it answers. up starts it from nothing instead.
start() {
	need_root
	[ -f "$ROOT$HOME_IN/rabbitmq.conf" ] || die "$NODE has no directory in $ROOT: start it with up"
	mount_root
	if answers; then
		log "$NODE already running: $(url)"
		return
	fi
	in_root chown -R rabbitmq:rabbitmq "$HOME_IN"
	# The daemons do not inherit the lock's descriptor (9): they would hold
	# the lock as long as they run.
	in_root epmd -daemon -port "$EPMD_PORT" -address 127.0.0.1 9>&-
	log "starting $NODE (AMQP 127.0.0.1:$AMQP_PORT, management 127.0.0.1:$MGMT_PORT)"
	in_root rabbitmq-server -detached >/dev/null 2>&1 9>&- || true
	local i
	for i in $(seq 1 90); do
		if answers && curl -fsS -o /dev/null -u guest:guest "http://127.0.0.1:$MGMT_PORT/api/overview" 2>/dev/null; then
			log "$NODE is up: RabbitMQ $(in_root rabbitmqctl -q -n "$NODE" version)"
			check_delayed
			return
		fi
		sleep 2
	done
	tail -30 "$ROOT$HOME_IN"/log/*.log >&2 2>/dev/null || true
	down
	die "$NODE did not come up within 180 s"
}

# root_pids: every process running from the root.
root_pids() {
	local pid
	for pid in $(ls /proc | grep -E '^[0-9]+$'); do
		if [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$ROOT" ]; then
			echo "$pid"
		fi
	done
}

# node_of PID: the node a process of the root belongs to, from its
# environment (RabbitMQ 4.x keeps its paths off the command line).
node_of() { { tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null | sed -n 's/^RABBITMQ_NODENAME=//p'; }

# node_pids: this node's processes.
node_pids() {
	local pid
	for pid in $(root_pids); do
		[ "$(node_of "$pid")" = "$NODE" ] && echo "$pid"
	done
	return 0
}

down() {
	[ -d "$ROOT" ] || return 0
	need_root
	if mounted "$ROOT/proc"; then
		in_root rabbitmqctl -q -n "$NODE" stop >/dev/null 2>&1 || true
		local i
		for i in $(seq 1 30); do
			[ -z "$(node_pids)" ] && break
			sleep 1
		done
		# shellcheck disable=SC2046
		kill -9 $(node_pids) 2>/dev/null || true
	fi
	log "$NODE stopped"
	release "$NODE"
}

# release [NODE]: the root's last node takes its epmds, stray helpers and
# mounts along: unless a node other than NODE still runs from the root,
# kill what runs there and unmount it.
release() {
	local pid other
	for pid in $(root_pids); do
		other=$(node_of "$pid")
		if [ -n "$other" ] && [ "$other" != "${1:-}" ] && grep -q beam "/proc/$pid/comm" 2>/dev/null; then
			log "$ROOT stays mounted: $other runs from it"
			return 0
		fi
	done
	# shellcheck disable=SC2046
	kill -9 $(root_pids) 2>/dev/null || true
	unmount "$ROOT"
}

# run CMD...: up, CMD with the node's URLs in its environment, down.
run() {
	[ $# -gt 0 ] || die "run $VERSION: no command given"
	(lock && up) || exit 1
	trap '(lock && down)' EXIT
	trap 'exit 130' INT TERM
	local rc=0
	AMQP_URL=$(url) MANAGEMENT_URL=$(mgmt) RELAY_BROKER=$VERSION RELAY_EXPECT_BACKENDS=$(backends) "$@" || rc=$?
	return "$rc"
}

url() { printf 'amqp://guest:guest@127.0.0.1:%s/\n' "$AMQP_PORT"; }
mgmt() { printf 'http://guest:guest@127.0.0.1:%s\n' "$MGMT_PORT"; }

# lock: one up, down or build per root at a time, so two runs that start
# nodes of the same version side by side neither build the root twice nor
# unmount it under each other.
# A node that an earlier broker.sh started with the lock's descriptor
# open holds the lock as long as it runs: a lock held by nothing but
# such daemons counts as free.
lock() {
	need_root
	mkdir -p "$CACHE"
	exec 9>"$CACHE/$SUITE.lock"
	local waited=0
	until flock -w 5 9; do
		if held_by_daemons; then
			log "the lock $CACHE/$SUITE.lock is held by nodes' processes only (started with it open): going ahead"
			return 0
		fi
		waited=$((waited + 5))
		[ "$waited" -lt 900 ] || die "the lock $CACHE/$SUITE.lock is still held after 15 minutes"
	done
}

# held_by_daemons: whether every process that holds the lock (its
# descriptor's fdinfo shows the lock; waiters have it open too) is a
# node's (beam.smp, epmd and their helpers), none a broker.sh.
held_by_daemons() {
	local file=$CACHE/$SUITE.lock fd pid
	for fd in /proc/[0-9]*/fd/*; do
		[ "$(readlink "$fd" 2>/dev/null)" = "$file" ] || continue
		grep -q '^lock:' "${fd%/fd/*}/fdinfo/${fd##*/}" 2>/dev/null || continue
		pid=${fd#/proc/}
		pid=${pid%%/*}
		case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
		beam.smp | epmd | erl_child_setup | inet_gethost | heart | "") ;;
		*) return 1 ;;
		esac
	done
	return 0
}

cmd=${1:-}
shift || true
case "$cmd" in
up | down | start)
	settings "${1:-}"
	lock
	"$cmd"
	;;
run)
	settings "${1:-}"
	shift
	run "$@"
	;;
mount)
	settings "${1:-}"
	lock
	build
	mount_root
	echo "$ROOT"
	;;
unmount)
	settings "${1:-}"
	lock
	release
	;;
url | mgmt | backends)
	settings "${1:-}"
	"$cmd"
	;;
root)
	settings "${1:-}"
	lock
	build
	echo "$ROOT"
	;;
ctl)
	settings "${1:-}"
	shift
	in_root rabbitmqctl -n "$NODE" "$@"
	;;
status)
	for v in 3.10 4.0 4.3; do
		settings "$v"
		if [ -d "$ROOT" ] && mounted "$ROOT/proc" && answers; then
			echo "$v running $(url)"
		else
			echo "$v stopped"
		fi
	done
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
