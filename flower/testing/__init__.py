"""Offline testing for flower and for workflows built on it: a scripted fake Messages API.

The Claude Code CLI bundled with claude-agent-sdk runs against `FakeAPI` exactly as against the
real API: tools really run, hooks really fire. Scripts say what the "model" answers.
`starter_cast()` is a ready script that plays every role of the starter flow on `DEMO_ASK`
(what `flower demo` runs).
"""

from flower.testing.demo import DEMO_ASK, DEMO_ASKS, GOAL_MARKERS, ROLE_MARKERS, starter_cast
from flower.testing.replies import (
    Block,
    Fault,
    Reply,
    Text,
    Thinking,
    ToolUse,
    Usage,
    drop,
    http_error,
    prompt_too_long,
    reset,
    stream_error,
    text,
    tool,
)
from flower.testing.request import Request, ToolResult, fingerprint
from flower.testing.script import (
    Always,
    Rule,
    Rules,
    Script,
    ScriptError,
    ScriptFileError,
    Sequence,
    When,
    rules,
    sequence,
    working_directory,
)
from flower.testing.scriptfile import load_script
from flower.testing.server import OFFLINE_ENV, PLACEHOLDER_KEY, FakeAPI

__all__ = [
    "DEMO_ASK",
    "DEMO_ASKS",
    "GOAL_MARKERS",
    "OFFLINE_ENV",
    "PLACEHOLDER_KEY",
    "ROLE_MARKERS",
    "Always",
    "Block",
    "FakeAPI",
    "Fault",
    "Reply",
    "Request",
    "Rule",
    "Rules",
    "Script",
    "ScriptError",
    "ScriptFileError",
    "Sequence",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolUse",
    "Usage",
    "When",
    "drop",
    "fingerprint",
    "http_error",
    "load_script",
    "prompt_too_long",
    "reset",
    "rules",
    "sequence",
    "starter_cast",
    "stream_error",
    "text",
    "tool",
    "working_directory",
]
