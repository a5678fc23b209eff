#!/usr/bin/env bash
# Register gVisor (runsc) with the Docker engine that answers, so `flowerbox --runtime runsc`
# can put a user-space kernel between the agent and the host's (docs/threat-model.md).
# Called by `docker/engine.sh --gvisor` (and `docker/prepare.sh --gvisor`, as CI does): only
# when asked, never by surprise.
#
# Idempotent: when the engine already lists a runtime named runsc with our arguments it does
# nothing (root or not). Otherwise, as root:
#   - installs the newest runsc the package registries offer (Debian's `runsc`; apt says which
#     version that is) when it is missing;
#   - chooses the platform from facts (docker/gvisor-platform.sh): kvm where a trial sandbox
#     boots on /dev/kvm, else systrap where this runsc has it (2023 on), else ptrace (the 2022
#     release Debian bookworm ships), and says which and why; re-run as root, it re-decides
#     and re-registers when the decision changed;
#   - merges {"runtimes": {"runsc": ...}} into the engine's daemon.json (the file dockerd was
#     started with, else /etc/docker/daemon.json; docker/daemon-runtime.py): every other key
#     stays as it was, the file as it was before the first registration is kept beside it as
#     daemon.json.flowerbox-bak, and the new one replaces it atomically;
#   - reloads the engine with SIGHUP (`systemctl reload docker` where systemd runs it): a
#     reload, never a restart, so no running container stops.
# The runtime's arguments, and why each:
#   --platform=P      how the sentry traps the agent's system calls (above)
#   --network=none    the box has no network of its own (flowerbox passes `--network none`);
#                     gVisor's netstack still gives it the loopback its relay listens on
#   --host-uds=open   the relay connects to the gateway's unix socket, a host socket in a
#                     bind-mounted folder; `open` allows connecting to one, never creating one
# Not --oci-seccomp (Docker's profile applied inside the sandbox too): with it, this gVisor
# (20221219) refuses every new thread (measured), so the CLI cannot run. The Sentry runs under
# its own seccomp filter on the host either way (the self-test reads it there).
# Not root: a registration with these arguments on any platform is taken as it is (the KVM
# trial needs root); none: stops with the one command to run (sudo, once).
set -euo pipefail

say() { printf 'gvisor.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

runtime=${FLOWERBOX_GVISOR_RUNTIME:-runsc}

choose_platform() {  # $1: runsc
    bash "$(dirname "${BASH_SOURCE[0]}")/gvisor-platform.sh" "$1"
}

registered_args() {
    docker info --format "{{with index .Runtimes \"$runtime\"}}{{json .}}{{end}}" 2>/dev/null
}

wanted_args() {  # $1: the platform
    printf '["--platform=%s","--network=none","--host-uds=open"]' "$1"
}

docker info >/dev/null 2>&1 || die "no Docker engine answers: run \`bash docker/engine.sh\` first"

# The platform of a registration with our arguments, or nothing.
registered_platform() {
    local args
    args=$(registered_args)
    for p in kvm systrap ptrace; do
        if [[ $args == *"$(wanted_args "$p")"* ]]; then
            echo "$p"
            return
        fi
    done
}

runsc_path=$(command -v runsc 2>/dev/null || true)
if [[ -n $runsc_path ]]; then
    current=$(registered_platform)
    if [[ -n $current && $(id -u) != 0 ]]; then
        say "the engine already runs $runtime ($("$runsc_path" --version 2>/dev/null | head -n 1), platform $current)"
        exit 0
    fi
    if [[ $(id -u) == 0 ]]; then
        platform=$(choose_platform "$runsc_path")
        if [[ $current == "$platform" ]]; then
            say "the engine already runs $runtime ($("$runsc_path" --version 2>/dev/null | head -n 1), platform $platform)"
            exit 0
        fi
    fi
fi

if [[ $(id -u) != 0 ]]; then
    die "gVisor is not registered with the engine. Installing and registering it needs root," \
        "once: run \`sudo bash docker/engine.sh --gvisor\` (it installs Debian's runsc, merges" \
        "one runtime into /etc/docker/daemon.json and reloads the engine without restarting it)"
fi

if [[ -z $runsc_path ]]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed"
    candidate=$(apt-cache policy runsc 2>/dev/null | sed -n 's/^ *Candidate: //p')
    [[ -n $candidate && $candidate != "(none)" ]] \
        || die "no runsc package here: gVisor's own releases (gvisor.dev/docs/user_guide/install) are the other way"
    say "installing gVisor: Debian's runsc $candidate (the newest the package registries offer)"
    apt-get install -y -qq --no-install-recommends runsc >/dev/null || die "apt-get install runsc failed"
    runsc_path=$(command -v runsc) || die "runsc installed but not on PATH"
    platform=$(choose_platform "$runsc_path")
fi
say "$("$runsc_path" --version 2>/dev/null | head -n 1) at $runsc_path, platform $platform"

# The config file the running engine reads: its --config-file, else the default.
config=/etc/docker/daemon.json
dockerd_pid=""
for pid in $(pgrep -x dockerd 2>/dev/null); do
    grep -qE '^State:[[:space:]]+[^Z]' "/proc/$pid/status" 2>/dev/null || continue
    dockerd_pid=$pid
    # --config-file=F or --config-file F (the last one wins, as for dockerd)
    from_flag=$(tr '\0' '\n' <"/proc/$pid/cmdline" \
        | awk 'take { f = $0; take = 0 } /^--config-file=/ { f = substr($0, 15) }
               /^--config-file$/ { take = 1 } END { print f }')
    if [[ -n $from_flag ]]; then config=$from_flag; fi
done

mkdir -p "$(dirname "$config")"
python3 "$(dirname "${BASH_SOURCE[0]}")/daemon-runtime.py" "$config" "$runtime" "$runsc_path" \
    "$(wanted_args "$platform")"
say "registered $runtime in $config"

if [[ $(systemctl is-system-running 2>/dev/null) =~ ^(running|degraded|starting)$ ]] \
    && systemctl is-active --quiet docker 2>/dev/null; then
    systemctl reload docker || die "systemctl reload docker failed (journalctl -u docker says why)"
elif [[ -n $dockerd_pid ]]; then
    kill -HUP "$dockerd_pid"
else
    die "no dockerd process found to reload: restart the engine yourself to load $config"
fi
for ((i = 0; i < 40; i++)); do
    if [[ -n $(registered_args) ]]; then
        say "the engine now offers $runtime: \`flowerbox --runtime runsc\`"
        exit 0
    fi
    sleep 0.25
done
die "the engine did not pick up $runtime after a reload (its log says why)"
