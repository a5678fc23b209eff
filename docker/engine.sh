#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine; start one if not (CI and our dev machines).
#
# Idempotent: when `docker info` already works it does nothing. Otherwise it installs Debian's
# engine (docker.io, 20.10) and debootstrap (for docker/base-image.sh) when missing, and starts
# dockerd in the background with no default bridge:
#   --bridge=none       no container ever gets a private-range address; tests use
#                       `--network none` or `--network host` only (DESIGN.md, Testing)
#   --iptables=false    with no bridge there is nothing to NAT or filter, so the engine leaves
#   --ip-masq=false     the host's firewall and forwarding settings alone (it also starts in
#   --ip-forward=false  VMs whose kernel lacks some netfilter modules)
# The daemon's log goes to $FLOWERBOX_DOCKERD_LOG (default /tmp/flowerbox-dockerd.log).
# Exits non-zero with the reason when no engine can be had.
set -euo pipefail

log=${FLOWERBOX_DOCKERD_LOG:-/tmp/flowerbox-dockerd.log}
wait_s=${FLOWERBOX_DOCKERD_WAIT:-60}

say() { printf 'engine.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if docker info >/dev/null 2>&1; then
    say "a Docker engine already answers ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
    exit 0
fi

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if ((${#need[@]})); then
    [[ $(id -u) == 0 ]] || die "installing ${need[*]} needs root; run as root or install them yourself"
    say "installing ${need[*]} (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
        || die "apt-get install ${need[*]} failed"
fi
# The client may be a separate, newer binary (/usr/local/bin/docker here); Debian's docker.io
# brings one too, so after the install there is always a client.
command -v docker >/dev/null 2>&1 || die "no docker client on PATH"

[[ $(id -u) == 0 ]] || die "no engine answers and starting dockerd needs root (or start it yourself)"

# A live dockerd (not a zombie left by a killed session: pgrep lists those too).
dockerd_alive() {
    local pid
    for pid in $(pgrep -x dockerd 2>/dev/null); do
        grep -qE '^State:[[:space:]]+[^Z]' "/proc/$pid/status" 2>/dev/null && return 0
    done
    return 1
}

if ! dockerd_alive; then
    # A socket left by a daemon that died; dockerd refuses to start over it.
    rm -f /var/run/docker.sock
    say "starting dockerd (log: $log)"
    # Its own session: a daemon must not die with the shell or job that started it (a
    # killed process group took the engine down with it, mid-session, with no log line).
    setsid nohup dockerd \
        --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
        >>"$log" 2>&1 </dev/null &
else
    say "dockerd is running but does not answer yet; waiting"
fi

for ((i = 0; i < wait_s * 2; i++)); do
    if docker info >/dev/null 2>&1; then
        say "engine up: $(docker info --format '{{.ServerVersion}}, storage {{.Driver}}')"
        exit 0
    fi
    if ! dockerd_alive; then
        tail -n 20 "$log" >&2 2>/dev/null || true
        die "dockerd exited while starting (log above, full log: $log)"
    fi
    sleep 0.5
done
tail -n 20 "$log" >&2 2>/dev/null || true
die "dockerd did not answer within ${wait_s}s (full log: $log)"
