#!/usr/bin/env bash
# Make sure a Docker engine answers for the caller; start one if not.
#
# Idempotent: when `docker info` works it does nothing: that engine (the system's, as a rule)
# is the one used, and no daemon of ours is ever started beside it. Otherwise it says what it
# is about to do and why that needs root before doing it:
#   - not root: stops there, with the commands to run (`sudo bash docker/engine.sh`, and the
#     docker group when the engine runs but refuses the caller);
#   - root: installs Debian's engine (docker.io) when missing, then starts the system's docker
#     service where systemd runs; where it does not (a container, CI) it starts dockerd in the
#     background with no default bridge:
#       --bridge=none       no container ever gets a private-range address; tests use
#                           `--network none` or `--network host` only (DESIGN.md, Testing)
#       --iptables=false    with no bridge there is nothing to NAT or filter, so the engine leaves
#       --ip-masq=false     the host's firewall and forwarding settings alone (it also starts in
#       --ip-forward=false  VMs whose kernel lacks some netfilter modules)
#     That daemon's log goes to $FLOWERBOX_DOCKERD_LOG (default /tmp/flowerbox-dockerd.log).
# Exits non-zero with the reason when no engine can be had.
#
# `--gvisor`: then registers gVisor's runsc with that engine (docker/gvisor.sh says how: a
# merge into daemon.json and a reload, never a restart), for `flowerbox --runtime runsc`.
set -euo pipefail

case ${1:-} in
    "") ;;
    --gvisor)
        here=$(dirname "${BASH_SOURCE[0]}")
        bash "$here/engine.sh"
        exec bash "$here/gvisor.sh"
        ;;
    *) printf 'engine.sh: error: unknown argument %s (usage: engine.sh [--gvisor])\n' "$1" >&2; exit 2 ;;
esac

log=${FLOWERBOX_DOCKERD_LOG:-/tmp/flowerbox-dockerd.log}
wait_s=${FLOWERBOX_DOCKERD_WAIT:-60}

say() { printf 'engine.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if answer=$(docker info --format '{{.ServerVersion}}' 2>&1); then
    say "using the Docker engine that answers ($answer)"
    exit 0
fi

if [[ $(id -u) != 0 ]]; then
    if [[ $answer == *"permission denied"* ]]; then
        die "a Docker engine runs but refuses you ($(id -un)): add yourself to the docker group" \
            "with \`sudo usermod -aG docker $(id -un)\`, log in again, then run this again"
    fi
    die "no Docker engine answers. Setting one up needs root, once: run" \
        "\`sudo bash docker/engine.sh\` (it installs Debian's docker.io when missing and starts" \
        "the system's docker service), then \`sudo usermod -aG docker $(id -un)\`, log in again," \
        "and run this again"
fi

if ! command -v dockerd >/dev/null 2>&1; then
    say "no Docker engine here: installing Debian's docker.io (apt, as root)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends docker.io >/dev/null \
        || die "apt-get install docker.io failed"
fi
# The client may be a separate, newer binary (/usr/local/bin/docker here); Debian's docker.io
# brings one too, so after the install there is always a client.
command -v docker >/dev/null 2>&1 || die "no docker client on PATH"

engine_up() { docker info >/dev/null 2>&1; }

# systemd runs the system's engine with its own settings (and the docker group on its socket).
if [[ $(systemctl is-system-running 2>/dev/null) =~ ^(running|degraded|starting)$ ]]; then
    say "starting the system's docker service (systemctl)"
    systemctl enable --now docker >/dev/null 2>&1 || die "systemctl could not start docker (journalctl -u docker says why)"
    for ((i = 0; i < wait_s * 2; i++)); do
        engine_up && { say "engine up: $(docker info --format '{{.ServerVersion}}')"; exit 0; }
        sleep 0.5
    done
    die "the docker service did not answer within ${wait_s}s (journalctl -u docker says why)"
fi

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
    say "no systemd here: starting dockerd with no bridge (log: $log)"
    # Its own session: a daemon must not die with the shell or job that started it (a
    # killed process group took the engine down with it, mid-session, with no log line).
    setsid nohup dockerd \
        --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
        >>"$log" 2>&1 </dev/null &
else
    say "dockerd is running but does not answer yet; waiting"
fi

for ((i = 0; i < wait_s * 2; i++)); do
    if engine_up; then
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
