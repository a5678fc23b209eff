#!/usr/bin/env bash
# Everything the appliance needs on this machine, made by the project's own files: a Docker
# engine (docker/engine.sh: the one that answers, else the system's, set up as root), the local
# base image (docker/base-image.sh: debian:bookworm-slim where a registry gives it, else
# debootstrap as root) and flowerbox:dev built from this checkout. Used by `make demo` and by
# CI. Each step is a no-op or a cache hit when already done; a step that needs root and lacks
# it says so and what to run, before doing anything; a failure exits non-zero with its reason
# (the build's log tail included). It removes only what its own build left behind.
#
# `--gvisor` (CI passes it): the engine also gets gVisor's runsc registered (docker/gvisor.sh),
# so the engine tests run under both runtimes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case ${1:-} in
    "") engine_args=() ;;
    --gvisor) engine_args=(--gvisor) ;;
    *) echo "prepare.sh: error: unknown argument $1 (usage: prepare.sh [--gvisor])" >&2; exit 2 ;;
esac

base=${FLOWERBOX_BASE_IMAGE:-flowerbox-base:bookworm}
image=${FLOWERBOX_IMAGE:-flowerbox:dev}

bash docker/engine.sh "${engine_args[@]}"
bash docker/base-image.sh
# The image is labelled with the version it was built for: flowerbox rebuilds any other.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
# This build's own id, on every stage it makes (the Dockerfile's dev.flower.build.id): what it
# leaves behind is found by it alone, never another build's or another user's images.
build_id=$(cat /proc/sys/kernel/random/uuid)
me=$(id -u)
previous=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
build_log=$(mktemp /tmp/flowerbox-build.XXXXXX.log)
echo "prepare.sh: building $image on $base (log: $build_log)" >&2
if ! DOCKER_BUILDKIT=0 docker build --network host \
    --build-arg BASE_IMAGE="$base" --build-arg FLOWERBOX_VERSION="$version" \
    --build-arg FLOWERBOX_BUILD_ID="$build_id" --build-arg FLOWERBOX_BUILD_USER="$me" \
    -t "$image" . >"$build_log" 2>&1; then
    tail -n 40 "$build_log" >&2
    echo "prepare.sh: error: building $image failed (log above)" >&2
    exit 1
fi
# The classic builder leaves the builder stage behind untagged (~0.9 GB a build): this
# build's goes, by its id; another build's (a colleague's, running now or done) stays.
docker image prune -f --filter "label=dev.flower.build.id=$build_id" >/dev/null
# The image this build took "$image" from, now untagged: removed only when this same user
# built it and no container uses it (no --force); another user's stays.
if [[ -n $previous ]]; then
    owner=$(docker image inspect --format \
        '{{index .Config.Labels "dev.flower.build.user"}}/{{len .RepoTags}}' "$previous" \
        2>/dev/null || true)
    if [[ $owner == "$me/0" ]]; then
        docker image rm "$previous" >/dev/null 2>&1 || true
    fi
fi
echo "prepare.sh: $image is ready" >&2
