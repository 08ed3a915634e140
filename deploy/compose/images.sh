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
# It also builds relay-stand-in/rabbitmq:bookworm, Debian's rabbitmq-server
# with the management plugin and deploy/rabbitmq's configuration, which
# deploy/compose/offline.yml runs instead of deploy/rabbitmq: that image
# downloads the delayed-message plugin, which no offline build can.
#
# Built images are saved in $RELAY_CACHE/images, so the next run loads them
# in seconds. DOCKER_HOST selects the engine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${RELAY_CACHE:-/var/cache/relay}/images
MIRROR=${RELAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA=${RELAY_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
GOROOT_HOST=${RELAY_GOROOT:-/usr/local/go}
BROKER=relay-stand-in/rabbitmq:bookworm
log() { printf 'images: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
mkdir -p "$CACHE"

have() { docker image inspect "$1" >/dev/null 2>&1; }
file_of() { printf '%s/%s.tar' "$CACHE" "$(printf '%s' "$1" | tr '/:' '__')"; }

# ensure IMAGE BUILDER: the image from the engine, the cache, a registry or
# BUILDER, in that order.
ensure() {
	local image=$1 builder=$2 file
	file=$(file_of "$image")
	if have "$image"; then
		log "$image: in the engine"
		return
	fi
	if [ -f "$file" ] && docker load -q -i "$file" >/dev/null && have "$image"; then
		log "$image: loaded from $file"
		return
	fi
	if [ "$builder" != build_broker ] && timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
		log "$image: pulled"
		return
	fi
	log "$image: no registry answers; building a stand-in from Debian packages"
	"$builder" "$image"
	docker save -o "$file.tmp" "$image" && mv "$file.tmp" "$file"
	log "$image: built, saved in $file"
}

# rootfs NAME [PACKAGES]: a debootstrap bookworm root as a tarball, cached.
rootfs() {
	local name=$1 include=${2:-} tarball=$CACHE/$1.rootfs.tar
	if [ ! -f "$tarball" ]; then
		command -v debootstrap >/dev/null || {
			apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
		}
		local tmp
		tmp=$(mktemp -d "$CACHE/root.XXXXXX")
		log "debootstrap bookworm ${include:+with $include }into $tmp"
		debootstrap --variant=minbase ${include:+--include="$include"} bookworm "$tmp" "$MIRROR" >"$CACHE/$name.debootstrap.log" 2>&1 ||
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
	docker import "$(rootfs bookworm)" relay-stand-in/bookworm:minbase >/dev/null
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

build_broker() {
	local image=$1 ctx
	docker import "$(rootfs bookworm-rabbitmq rabbitmq-server)" relay-stand-in/bookworm:rabbitmq-root >/dev/null
	ctx=$(mktemp -d)
	cp "$ROOT/deploy/rabbitmq/rabbitmq.conf" "$ctx/rabbitmq.conf"
	cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM relay-stand-in/bookworm:rabbitmq-root
# As the official image: guest may connect from other containers.
RUN rabbitmq-plugins enable --offline rabbitmq_management \
	&& mkdir -p /etc/rabbitmq/conf.d /var/lib/rabbitmq /var/log/rabbitmq \
	&& echo 'loopback_users.guest = false' >/etc/rabbitmq/conf.d/10-defaults.conf \
	&& chown -R rabbitmq:rabbitmq /etc/rabbitmq /var/lib/rabbitmq /var/log/rabbitmq
COPY --chown=rabbitmq:rabbitmq rabbitmq.conf /etc/rabbitmq/conf.d/30-relay.conf
ENV HOME=/var/lib/rabbitmq RABBITMQ_LOGS=- LANG=C.UTF-8
USER rabbitmq
EXPOSE 5672 15672
CMD ["/usr/lib/rabbitmq/bin/rabbitmq-server"]
DOCKERFILE
	DOCKER_BUILDKIT=1 docker build -q -t "$image" "$ctx" >/dev/null
	rm -rf "$ctx"
}

golang=$(sed -n 's/^FROM .*\(golang:[^ ]*\).*/\1/p' "$ROOT/deploy/relay/Dockerfile" | head -n1)
distroless=$(sed -n 's/^FROM \(gcr.io\/distroless[^ ]*\).*/\1/p' "$ROOT/deploy/relay/Dockerfile" | head -n1)
[ -n "$golang" ] && [ -n "$distroless" ] || die "cannot read the base images from deploy/relay/Dockerfile"
ensure "$golang" build_golang
ensure "$distroless" build_distroless
ensure "$BROKER" build_broker
