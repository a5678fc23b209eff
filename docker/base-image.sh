#!/usr/bin/env bash
# Make the local base image the flowerbox image is built on (default tag
# flowerbox-base:bookworm) when it is absent.
#
# Where a registry answers it is Debian's own `debian:bookworm-slim` (already here, or pulled
# with a short time limit), only tagged: no root, nothing of this host in it. Where none does
# (our machines, CI, an offline box) the fallback makes a minimal Debian bookworm with
# debootstrap from the mirror apt already uses here and imports it with `docker import`; that
# needs root, and the script says so before. The fallback already holds every package the
# Dockerfile wants (so its apt step is skipped) and it carries THIS host's CA bundle: registry
# traffic on our machines passes a TLS-inspecting proxy, and pip inside `docker build` needs
# that CA to reach PyPI. That bundle belongs to this fallback base only, never to the
# Dockerfile.
#
# Cached by tag: a second run takes about a second. FLOWERBOX_BASE_IMAGE overrides the tag,
# FLOWERBOX_REBUILD_BASE=1 makes it again, FLOWERBOX_PULL_TIMEOUT (seconds, default 30)
# bounds the pull.
set -euo pipefail

tag=${FLOWERBOX_BASE_IMAGE:-flowerbox-base:bookworm}
upstream=debian:bookworm-slim
pull_s=${FLOWERBOX_PULL_TIMEOUT:-30}
suite=bookworm
# python3-venv brings ensurepip (pip for the builder's venv); tini is the init; ripgrep and git
# are what the agent's tools use.
include=python3,python3-venv,git,ca-certificates,tini,ripgrep
ca_bundle=/etc/ssl/certs/ca-certificates.crt

say() { printf 'base-image.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker engine answers: run \`bash docker/engine.sh\` first"

if [[ ${FLOWERBOX_REBUILD_BASE:-0} != 1 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
    say "$tag is there (FLOWERBOX_REBUILD_BASE=1 makes it again)"
    exit 0
fi

if docker image inspect "$upstream" >/dev/null 2>&1 \
    || { say "pulling $upstream (at most ${pull_s}s)"; timeout "$pull_s" docker pull -q "$upstream" >/dev/null 2>&1; }; then
    docker tag "$upstream" "$tag"
    say "$tag is $upstream"
    exit 0
fi

say "no registry gave $upstream within ${pull_s}s: making $tag with debootstrap instead" \
    "(Debian's mirror, no registry); debootstrap needs root"
[[ $(id -u) == 0 ]] || die "run \`sudo bash docker/base-image.sh\` once (it installs debootstrap" \
    "when missing and builds $tag, about 2 minutes), then run this again"
if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap (apt, as root)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
        || die "apt-get install debootstrap failed"
fi

# The Debian mirror apt uses here: deb822 .sources files first, then one-line sources.list.
mirror=${FLOWERBOX_DEBIAN_MIRROR:-}
if [[ -z $mirror ]]; then
    mirror=$(
        {
            for f in /etc/apt/sources.list.d/*.sources; do
                [[ -f $f ]] || continue
                awk 'BEGIN{IGNORECASE=1} /^URIs:/ {for (i = 2; i <= NF; i++) print $i}' "$f"
            done
            for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
                [[ -f $f ]] || continue
                awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { print $i; break } }' "$f"
            done
        } | grep -E '/debian/?$' | head -n 1
    ) || true
fi
mirror=${mirror:-http://deb.debian.org/debian}

work=$(mktemp -d /tmp/flowerbox-base.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

say "debootstrap $suite from $mirror into $work/root"
start=$SECONDS
debootstrap --variant=minbase --include="$include" "$suite" "$work/root" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    die "debootstrap failed (log above)"
}
say "debootstrap took $((SECONDS - start))s"

root=$work/root
# The host's CA bundle, so pip and git inside test builds trust the TLS-inspecting proxy.
if [[ -f $ca_bundle ]]; then
    cp "$ca_bundle" "$root/etc/ssl/certs/ca-certificates.crt"
fi
# Same apt sources as the host's mirror, and a slimmer tree: no apt lists, caches, docs.
printf 'deb %s %s main\ndeb %s %s-updates main\n' "$mirror" "$suite" "$mirror" "$suite" \
    >"$root/etc/apt/sources.list"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/root/.cache
# A container's /etc/hostname, /etc/hosts and /etc/resolv.conf are bind-mounted by the engine.
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"

say "importing as $tag"
tar --numeric-owner -C "$root" -c . |
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' \
        --message "debootstrap --variant=minbase --include=$include $suite (flowerbox test base)" \
        - "$tag" >/dev/null
say "$tag: $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}') in $((SECONDS - start))s"
