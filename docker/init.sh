#!/bin/sh
# The image's entrypoint: tini as the init, in the form this kernel allows (decided here, at
# every start, not by a flag), then docker/entrypoint.sh.
#   PID 1 (`docker run` without --init): tini, which reaps as PID 1 needs no subreaper.
#   below another init (flowerbox runs `--init`: docker's init is PID 1) on a kernel with
#   child subreapers: `tini -s`, so orphans of the box's command are still reaped by it.
#   below another init, no subreaper (gVisor's runsc: prctl(PR_SET_CHILD_SUBREAPER) says
#   EINVAL, and `tini -s` refuses to start): no second init; PID 1 reaps what is orphaned.
set -eu
entry=/usr/local/bin/flowerbox-entrypoint
if [ "$$" = 1 ]; then
    exec /usr/bin/tini -- "$entry" "$@"
fi
if /usr/bin/tini -s -- /bin/true 2>/dev/null; then
    exec /usr/bin/tini -s -- "$entry" "$@"
fi
exec "$entry" "$@"
