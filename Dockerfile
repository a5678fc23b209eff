# flowerbox: the flower CLI, the Claude Code CLI bundled in claude-agent-sdk, and the flowerbox
# package (gateway and relay), in one image. docs/image.md says how it is built and tested.
#
#   docker build --build-arg FLOWERBOX_VERSION=0.2.0 -t flowerbox:dev .   # on debian:bookworm-slim
#   DOCKER_BUILDKIT=0 docker build --network host \
#     --build-arg BASE_IMAGE=flowerbox-base:bookworm -t flowerbox:dev .   # our test machines
#
# Written for the classic builder as well as BuildKit: no heredocs, no RUN --mount.
# hadolint-clean; apt versions are not pinned (DL3008, ignored where it applies): the packages
# come from the base image's own Debian release, which moves with its security updates, and
# the Python side, where nearly all of the image is, is hash-pinned in requirements.lock.

# By tag here (a digest could not be checked from where this is built and tested, and a wrong
# one breaks every build); a release build pins it:
#   --build-arg BASE_IMAGE=debian:bookworm-slim@sha256:<the digest its registry shows>
ARG BASE_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS builder
# Every image this file makes carries it, so cleaning up after a build removes only ours.
LABEL dev.flower.build="flowerbox"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG DEBIAN_FRONTEND=noninteractive
# Install only what the base lacks: the test base image (docker/base-image.sh) has it all.
# hadolint ignore=DL3008
RUN if ! dpkg -s python3 python3-venv >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1

# Every third-party wheel is fetched against the lock's hashes (runtime set and the build
# backend); everything after that installs from that verified folder with no index at all.
COPY requirements.lock /src/requirements.lock
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip download --require-hashes --no-deps --only-binary=:all: \
        --dest /wheels -r /src/requirements.lock \
    && /opt/build/bin/pip install --no-index --find-links=/wheels hatchling

COPY pyproject.toml README.md /src/
COPY flower /src/flower
COPY flowerbox /src/flowerbox
# The Claude Code plugin: the wheel carries it as flower/plugin (pyproject's force-include).
COPY plugin /src/plugin
# The runtime venv gets no pip of its own (an image is replaced by building a new one)
# and only what flowerbox's metadata requires, resolved from the verified wheels.
RUN /opt/build/bin/pip wheel --no-index --no-deps --no-build-isolation --wheel-dir=/wheels /src \
    && python3 -m venv --without-pip /opt/flowerbox \
    && /opt/build/bin/pip --python /opt/flowerbox/bin/python install --no-index \
        --find-links=/wheels flowerbox \
    && /opt/flowerbox/bin/python -c 'import claude_agent_sdk, flower, flowerbox'
# Which build made this stage, and for whom: the builder's image is left behind untagged, and
# docker/prepare.sh removes it by this id alone, never another build's (last in the stage, so
# a new id costs no cached step).
ARG FLOWERBOX_BUILD_ID=""
ARG FLOWERBOX_BUILD_USER=""
LABEL dev.flower.build.id="${FLOWERBOX_BUILD_ID}" dev.flower.build.user="${FLOWERBOX_BUILD_USER}"

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG DEBIAN_FRONTEND=noninteractive
# python3 runs the venv; git and ripgrep are the agent's tools; tini is the init.
# hadolint ignore=DL3008
RUN if ! dpkg -s python3 git ripgrep ca-certificates tini >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 git ripgrep ca-certificates tini \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && groupadd --gid 10001 flower \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/flower \
        --shell /bin/bash flower

COPY --from=builder /opt/flowerbox /opt/flowerbox
COPY docker/entrypoint.sh /usr/local/bin/flowerbox-entrypoint
COPY docker/init.sh /usr/local/bin/flowerbox-init

# flowerbox passes its own version (flowerbox.box.engine.ensure_image, docker/prepare.sh) and
# rebuilds an image whose label differs: an image built for other code is never run.
ARG FLOWERBOX_VERSION=unknown
ARG FLOWERBOX_BUILD_ID=""
ARG FLOWERBOX_BUILD_USER=""
LABEL dev.flower.build="flowerbox" \
      dev.flower.build.id="${FLOWERBOX_BUILD_ID}" \
      dev.flower.build.user="${FLOWERBOX_BUILD_USER}" \
      org.opencontainers.image.title="flowerbox" \
      org.opencontainers.image.description="flower (long-horizon work with Claude Code) in a hardened container, with the flowerbox gateway and relay" \
      org.opencontainers.image.version="${FLOWERBOX_VERSION}" \
      org.opencontainers.image.source="https://github.com/flower/flowerbox" \
      org.opencontainers.image.licenses="MIT"

ENV PATH=/opt/flowerbox/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# flowerbox runs its containers as the host user's uid:gid; this user is the default for
# anyone who runs the image by hand.
USER 10001:10001
WORKDIR /home/flower

# tini reaps zombies and forwards signals; docker/init.sh starts it as this kernel allows (`-s`
# where `docker run --init`, which flowerbox uses, already put another init at PID 1, unless
# the kernel has no child subreaper, as gVisor's).
ENTRYPOINT ["/usr/local/bin/flowerbox-init"]
CMD ["flower", "--help"]
