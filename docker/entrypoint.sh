#!/bin/sh
# The image's entrypoint (after tini): a little setup, then `exec "$@"`.
# flowerbox passes the real command (`flower ...`, `python -m flowerbox.inside.relay ...`,
# `python -m flowerbox.sidecar.gateway ...`).
#
# The box runs as the host user's uid, which has no passwd entry here, on a read-only root:
# HOME may be unset, "/", or a path on a tmpfs that does not exist yet. Make it a usable folder
# where possible, else fall back to /tmp (the one writable place every box has).
set -eu

if [ -z "${HOME:-}" ] || [ "$HOME" = "/" ]; then
    HOME=/tmp/home
fi
if [ ! -d "$HOME" ]; then
    mkdir -p "$HOME" 2>/dev/null || HOME=/tmp/home
    mkdir -p "$HOME" 2>/dev/null || true
fi
export HOME

if [ "$#" -eq 0 ]; then
    set -- flower --help
fi
exec "$@"
