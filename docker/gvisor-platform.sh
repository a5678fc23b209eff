#!/usr/bin/env bash
# Which platform gVisor's Sentry uses to trap the agent's system calls, decided at set-up from
# facts on this machine (docs/decisions.md, "gVisor's platform"). Prints the platform on
# stdout and why on stderr; docker/gvisor.sh registers it and says it.
#   kvm      where the KVM device is there AND a sandbox boots on it (gVisor's advice on bare
#            metal: faster system calls than either trap). A device is not proof: a nested or
#            paravirtual KVM (this project's CI machine: kvm-pvm, no vmx/svm) takes the
#            ioctls, and the Sentry then spins for ever in its first KVM_RUN (measured). So a
#            trial sandbox runs `/bin/true` on it, FLOWERBOX_KVM_TRIAL_S seconds at most.
#   systrap  else, where this runsc has it (2023 on): seccomp traps, no KVM, faster than ptrace
#   ptrace   else (Debian bookworm's 20221219)
# Usage: gvisor-platform.sh [RUNSC]   (default: the runsc on PATH; as root: the trial boots a
# sandbox; not root, no trial)
set -euo pipefail

say() { printf 'gvisor.sh: %s\n' "$*" >&2; }

runsc=${1:-$(command -v runsc)}
device=${FLOWERBOX_KVM_DEVICE:-/dev/kvm}
trial_s=${FLOWERBOX_KVM_TRIAL_S:-10}

boots_on_kvm() {
    (cd / && timeout -k 2 "$trial_s" "$runsc" --platform=kvm --platform_device_path="$device" \
        --network=none "do" /bin/true) >/dev/null 2>&1
}

if [[ ! -c $device ]]; then
    say "no KVM device ($device): not the kvm platform"
elif [[ $(id -u) != 0 ]]; then
    say "$device is here, but only root can try a sandbox on it: not the kvm platform"
elif boots_on_kvm; then
    say "platform kvm: a trial sandbox booted on $device"
    echo kvm
    exit 0
else
    say "$device is here, but no trial sandbox booted on it within $trial_s s (a nested or" \
        "paravirtual KVM that gVisor's guest cannot run on): not the kvm platform"
fi
if "$runsc" flags 2>&1 | grep -A1 -- '-platform string' | grep -q systrap; then
    say "platform systrap (this runsc has it: no KVM needed, faster than ptrace)"
    echo systrap
else
    say "platform ptrace (this runsc has no systrap, which came in 2023)"
    echo ptrace
fi
