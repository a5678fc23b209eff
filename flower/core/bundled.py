"""What the installed claude-agent-sdk bundles, found without importing it.

Importing the SDK costs most of a second (its MCP types above all). A program that only names
the Claude Code CLI's version, such as flowerbox's host commands, whose box runs the SDK and
not the host, reads it from the SDK's files instead.
"""

from __future__ import annotations

import re
from importlib.util import find_spec
from pathlib import Path

SDK = "claude_agent_sdk"
VERSION_FILE = "_cli_version.py"  # the SDK's: `__cli_version__ = "2.1.332"`
_VERSION = re.compile(r"""^__cli_version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def sdk_folder() -> Path | None:
    """The installed SDK's package folder (None: not installed), its code left unrun."""
    spec = find_spec(SDK)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def cli_version() -> str:
    """The version of the Claude Code CLI the installed SDK bundles, or "unknown"."""
    folder = sdk_folder()
    try:
        found = _VERSION.search((folder / VERSION_FILE).read_text()) if folder else None
    except OSError:
        found = None
    return found.group(1) if found else "unknown"
