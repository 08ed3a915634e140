#!/usr/bin/env bash
# The base images the demo's Dockerfiles start from, for an engine that
# cannot pull them (CI reaches no image registry):
#
#   deploy/compose/images.sh
#
# For each of golang:<go.mod's version>-bookworm and
# gcr.io/distroless/static-debian12:nonroot it uses, in this order, the
# engine's copy, a copy saved in the cache, a pull, and only when the pull
# fails a stand-in built here from Debian packages under the same name:
#   - golang: debootstrap bookworm (minbase) with this machine's Go from
#     /usr/local/go and its CA bundle (so go mod download works through the
#     same proxies as here), GOPROXY and GOFLAGS as `go env` says;
#   - distroless static nonroot: from scratch, /etc/passwd and /etc/group
#     with nonroot (65532), the CA bundle, the zone database, /tmp.
# It also builds the stand-in broker deploy/compose/offline.yml runs instead
# of deploy/rabbitmq, whose official base image no offline engine has and
# which downloads the delayed-message plugin, as no offline build can:
#   - relay-stand-in/rabbitmq:4.0-delayed: Debian trixie's rabbitmq-server
#     (RabbitMQ 4.0) with the management plugin, the delayed-message
#     exchange plugin and deploy/rabbitmq's configuration. The plugin's
#     file (built for 4.0.x) is RELAY_DELAYED_PLUGIN, by default the copy in
#     shared/rabbitmq-plugins/ beside the repository, as deploy/broker.sh
#     finds it; in a plugins directory of its own on the node's plugin path.
#   - relay-stand-in/rabbitmq:4.0: the same without the delayed-message
#     plugin, where its file is missing, with a warning (the demo must then
#     run DELAY_BACKEND=levels or ttl); under CI=true that is an error.
# It prints the stand-in broker's image on stdout.
#
#   deploy/compose/images.sh roots
#
# only builds the Debian roots the stand-ins are made from (cached, as
# below), without an engine: a first run elsewhere can have them ready.
#
# Built images are saved in $RELAY_CACHE/images, so the next run loads them
# in seconds; the stand-in broker is built again when what it is built from
# (its Dockerfile, deploy/rabbitmq's configuration, the plugin) changes.
# DOCKER_HOST selects the engine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${RELAY_CACHE:-/var/cache/relay}/images
MIRROR=${RELAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA=${RELAY_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
GOROOT_HOST=${RELAY_GOROOT:-/usr/local/go}
DELAYED_PLUGIN=${RELAY_DELAYED_PLUGIN:-${ROOT%/*}/shared/rabbitmq-plugins/rabbitmq_delayed_message_exchange-4.0.7.ez}
log() { printf 'images: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
mkdir -p "$CACHE"

# have IMAGE [SUM]: the engine has IMAGE, and with SUM, built from files
# whose checksum is SUM (its relay.context label).
have() {
	docker image inspect "$1" >/dev/null 2>&1 || return 1
	[ -z "${2:-}" ] || [ "$(docker image inspect -f '{{index .Config.Labels "relay.context"}}' "$1")" = "$2" ]
}
file_of() { printf '%s/%s.tar' "$CACHE" "$(printf '%s' "$1" | tr '/:' '__')"; }

# ensure IMAGE BUILDER [SUM]: the image from the engine, the cache, a
# registry or BUILDER, in that order. With SUM, an image built from other
# files than SUM says is stale: only BUILDER makes it again.
ensure() {
	local image=$1 builder=$2 sum=${3:-} file
	file=$(file_of "$image")
	if have "$image" "$sum"; then
		log "$image: in the engine"
		return
	fi
	if [ -f "$file" ] && docker load -q -i "$file" >/dev/null && have "$image" "$sum"; then
		log "$image: loaded from $file"
		return
	fi
	if [ "$builder" != build_broker ] && timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
		log "$image: pulled"
		return
	fi
	if [ -n "$sum" ] && have "$image"; then
		log "$image: built from other files; building it again"
	else
		log "$image: no registry answers; building a stand-in from Debian packages"
	fi
	"$builder" "$image" "$sum"
	docker save -o "$file.tmp" "$image" && mv "$file.tmp" "$file"
	log "$image: built, saved in $file"
}

# rootfs SUITE NAME [PACKAGES]: a debootstrap root of Debian SUITE as a
# tarball, cached.
rootfs() {
	local suite=$1 name=$2 include=${3:-} tarball=$CACHE/$2.rootfs.tar
	if [ ! -f "$tarball" ]; then
		command -v debootstrap >/dev/null || {
			apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
		}
		local tmp
		tmp=$(mktemp -d "$CACHE/root.XXXXXX")
		log "debootstrap $suite ${include:+with $include }into $tmp"
		debootstrap --variant=minbase ${include:+--include="$include"} "$suite" "$tmp" "$MIRROR" >"$CACHE/$name.debootstrap.log" 2>&1 ||
			{ tail -20 "$CACHE/$name.debootstrap.log" >&2; rm -rf "$tmp"; die "debootstrap failed (log: $CACHE/$name.debootstrap.log)"; }
		rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
		tar -C "$tmp" --numeric-owner -cf "$tarball.tmp" .
		mv "$tarball.tmp" "$tarball"
		rm -rf "$tmp"
	fi
	printf '%s\n' "$tarball"
}

build_golang() {
	local image=$1 want have_version ctx
	want=${image#golang:}
	want=${want%-bookworm}
	have_version=$("$GOROOT_HOST/bin/go" env GOVERSION)
	[ "$have_version" = "go$want" ] || die "$image: this machine's Go is $have_version, the Dockerfile wants go$want"
	docker import "$(rootfs bookworm bookworm)" relay-stand-in/bookworm:minbase >/dev/null
	ctx=$(mktemp -d)
	cp -a "$GOROOT_HOST" "$ctx/go"
	rm -rf "$ctx/go/pkg/obj" "$ctx/go/.git"
	cp "$CA" "$ctx/ca-certificates.crt"
	cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM relay-stand-in/bookworm:minbase
COPY go /usr/local/go
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV GOLANG_VERSION=$want GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	GOPROXY=$(go env GOPROXY) GOSUMDB=$(go env GOSUMDB) SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
RUN mkdir -p /go/src /go/bin && chmod -R 1777 /go
WORKDIR /go
DOCKERFILE
	DOCKER_BUILDKIT=1 docker build -q -t "$image" "$ctx" >/dev/null
	rm -rf "$ctx"
}

build_distroless() {
	local image=$1 ctx
	ctx=$(mktemp -d)
	mkdir -p "$ctx/etc/ssl/certs" "$ctx/usr/share" "$ctx/tmp" "$ctx/home/nonroot"
	cp "$CA" "$ctx/etc/ssl/certs/ca-certificates.crt"
	cp -a /usr/share/zoneinfo "$ctx/usr/share/zoneinfo"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$ctx/etc/group"
	# Imported from a tarball, not COPYed: COPY would make /tmp 0755, and
	# a tmpfs mounted there takes that mode, which nonroot cannot write.
	chmod 1777 "$ctx/tmp"
	chown 65532:65532 "$ctx/home/nonroot"
	tar -C "$ctx" --numeric-owner -c . | docker import \
		--change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
		--change 'USER 65532:65532' --change 'WORKDIR /home/nonroot' - "$image" >/dev/null
	rm -rf "$ctx"
}

# delayed_plugin: whether the delayed-message plugin's file is there. Its
# absence is a warning, and under CI=true an error: CI runs the demo with
# its own delay backend, the plugin.
delayed_plugin() {
	[ -f "$DELAYED_PLUGIN" ] && return 0
	local why="no delayed-message plugin at $DELAYED_PLUGIN (set RELAY_DELAYED_PLUGIN to the .ez of shared/rabbitmq-plugins/)"
	[ "${CI:-}" != true ] || die "$why: under CI=true the stand-in broker must run the demo's delay backend, the plugin"
	log "warning: $why: the stand-in broker runs without it, and the demo on it needs DELAY_BACKEND=levels or ttl"
	return 1
}

# broker_context DIR: what the stand-in broker is built from, written into
# DIR (the plugin's file copied in, as a build sees only its context);
# prints the image's name.
broker_context() {
	local ctx=$1 image=relay-stand-in/rabbitmq:4.0 plugins=rabbitmq_management
	mkdir -p "$ctx/plugins"
	cp "$ROOT/deploy/rabbitmq/rabbitmq.conf" "$ctx/rabbitmq.conf"
	if delayed_plugin; then
		cp "$DELAYED_PLUGIN" "$ctx/plugins/"
		image=$image-delayed plugins="$plugins rabbitmq_delayed_message_exchange"
	fi
	# The plugins relay adds sit in a directory of their own, after the
	# broker's own on the node's plugin path; rabbitmq-env.conf sets it for
	# the server and the CLI tools alike. The plugin is built for 4.0.x.
	# As the official image: guest may connect from other containers.
	cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM relay-stand-in/trixie:rabbitmq-root
COPY plugins/ /usr/local/lib/rabbitmq/plugins/
RUN set -eu; \\
	version=\$(dpkg-query -W -f '\${Version}' rabbitmq-server); \\
	case \$version in 4.0.*) ;; *) echo "error: rabbitmq-server is \$version, not 4.0.x" >&2; exit 1 ;; esac; \\
	echo "PLUGINS_DIR=\$(ls -d /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins):/usr/local/lib/rabbitmq/plugins" >>/etc/rabbitmq/rabbitmq-env.conf; \\
	mkdir -p /etc/rabbitmq/conf.d /var/lib/rabbitmq /var/log/rabbitmq; \\
	echo 'loopback_users.guest = false' >/etc/rabbitmq/conf.d/10-defaults.conf; \\
	rabbitmq-plugins enable --offline $plugins; \\
	for p in $plugins; do \\
		grep -qw "\$p" /etc/rabbitmq/enabled_plugins || { echo "error: \$p is not in /etc/rabbitmq/enabled_plugins" >&2; exit 1; }; \\
	done; \\
	chown -R rabbitmq:rabbitmq /etc/rabbitmq /var/lib/rabbitmq /var/log/rabbitmq
COPY --chown=rabbitmq:rabbitmq rabbitmq.conf /etc/rabbitmq/conf.d/30-relay.conf
ENV HOME=/var/lib/rabbitmq RABBITMQ_LOGS=- LANG=C.UTF-8
USER rabbitmq
EXPOSE 5672 15672
CMD ["/usr/lib/rabbitmq/bin/rabbitmq-server"]
DOCKERFILE
	printf '%s\n' "$image"
}

# context_sum DIR: one checksum of the files in DIR and their names.
context_sum() {
	(cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

# build_broker IMAGE SUM: the stand-in broker from Debian trixie's
# rabbitmq-server and $broker_ctx, labelled with SUM.
build_broker() {
	local image=$1 sum=$2
	docker import "$(rootfs trixie trixie-rabbitmq rabbitmq-server)" relay-stand-in/trixie:rabbitmq-root >/dev/null
	DOCKER_BUILDKIT=1 docker build -q --label "relay.context=$sum" -t "$image" "$broker_ctx" >/dev/null
}

if [ "${1:-}" = roots ]; then
	rootfs bookworm bookworm >/dev/null
	rootfs trixie trixie-rabbitmq rabbitmq-server >/dev/null
	exit 0
fi

golang=$(sed -n 's/^FROM .*\(golang:[^ ]*\).*/\1/p' "$ROOT/deploy/relay/Dockerfile" | head -n1)
distroless=$(sed -n 's/^FROM \(gcr.io\/distroless[^ ]*\).*/\1/p' "$ROOT/deploy/relay/Dockerfile" | head -n1)
[ -n "$golang" ] && [ -n "$distroless" ] || die "cannot read the base images from deploy/relay/Dockerfile"
ensure "$golang" build_golang
ensure "$distroless" build_distroless
broker_ctx=$(mktemp -d)
trap 'rm -rf "$broker_ctx"' EXIT
broker=$(broker_context "$broker_ctx")
ensure "$broker" build_broker "$(context_sum "$broker_ctx")"
printf '%s\n' "$broker"
