#!/bin/sh
# flower's cli_path on Linux: run the Claude Code CLI under reaper.py, so that neither the CLI
# nor anything it starts outlives the flower process (flower/core/lifeline.py says how).
exec "$FLOWER_REAPER_PYTHON" -I -S "${0%/*}/reaper.py" "$@"
