"""The context window a model is taken to have, from its name alone: needed where the SDK is
not (a report drawn on the host, flowerbox's `report`), so apart from flower.core.agent.
"""

from __future__ import annotations

import os

__all__ = ["default_window"]


def default_window() -> int:
    """The context window guessed from ANTHROPIC_MODEL or ANTHROPIC_DEFAULT_OPUS_MODEL.

    Deliberately generous: overestimating is not a hard error (the API answers "prompt is too
    long", Runtime recognises it and hands off at once, with a degraded handoff).

        "[1m]" in the name               1_000_000
        haiku, claude-3*, *-4-*/*-4      200_000
        anything else (the 5 family,
        the CLI's default opus-5-5)      1_000_000
    """
    name = (
        os.environ.get("ANTHROPIC_MODEL") or os.environ.get("ANTHROPIC_DEFAULT_OPUS_MODEL") or ""
    ).lower()
    if "[1m]" in name:
        return 1_000_000
    older = ("haiku", "claude-3", "-4-", "-4@")
    if any(marker in name for marker in older) or name.endswith("-4"):
        return 200_000
    return 1_000_000
