"""Text and JSON a box wrote, made safe for a person's terminal and for the host's parser.

In a flowerbox workspace everything under `runs/`, the workbench and the workspace itself is
the agent's to write. Two functions stand between that and the host, used by flower
(`flower status`, the timeline) and flowerbox (ps, logs, attach, the end-of-run report) alike:

    print(printable(text_from_the_box))             # no control sequence, no hidden text
    print(printable(file_name, one_line=True))      # a name: every unsafe character escaped
    rows = parse_json(data, limit=MiB)              # bounded in size and depth, or an error

`printable` removes terminal control sequences (CSI, OSC, DCS, SOS, PM, APC, in their 7-bit
and 8-bit forms, e.g. an OSC 52 clipboard write), every other C0/C1 control but tab and
newline, and the characters that change how text looks without being seen: bidi overrides
and isolates, zero-width and other invisible formatting characters (Unicode's Cf), line and
paragraph separators, and the blank letters (Hangul fillers) that pass for spaces. With
`one_line` each such character is shown escaped (`\\x1b`, `\\u202e`, `\\n`) instead, so a name
stays one line and two different names never look the same.

`parse_json` refuses what is larger than `limit` or nested deeper than `depth` before the
parser sees it (Python's parser recurses: 10 KB of `[` is a RecursionError, and anything that
walks a deep value after it again), and raises UntrustedJSONError, a ValueError, for every
way it can fail, so callers skip and report with `except ValueError`.

Errors:
    UntrustedJSONError   too large, too deep, or not JSON; the message says which
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

from flower.core.lang import text
from flower.errors import FlowerError

__all__ = [
    "MAX_JSON_DEPTH",
    "PrintableStream",
    "UntrustedJSONError",
    "parse_json",
    "printable",
    "printable_data",
]

MiB = 1024 * 1024
MAX_JSON_DEPTH = 64  # flower's own files nest 6 deep at most; a model's tool input a few more
DEFAULT_JSON_LIMIT = MiB

# Control sequences, whole: CSI (7-bit ESC [ and 8-bit 0x9b), OSC (ESC ], 0x9d) up to BEL or
# ST, DCS/SOS/PM/APC (ESC P X ^ _, 0x90 0x98 0x9e 0x9f) up to ST, then any other ESC pair.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x9c|\x1b\\)?"
    r"|\x1b.?",
    re.DOTALL,
)
# Unicode's format characters (category Cf: bidi controls, zero-width characters, tags...),
# the line and paragraph separators, and invisible letters; tests/test_untrusted_text.py
# checks the Cf list against unicodedata.
_INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
_UNSAFE_IN_A_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
_INTRODUCERS = re.compile("[\x1b\x90\x98\x9b\x9d\x9e\x9f][^\x1b\x90\x98\x9b\x9d\x9e\x9f]*$")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` safe to show on a terminal: without control sequences and invisible characters
    (`one_line`: each of them, newlines and tabs included, escaped and shown instead)."""
    if one_line:
        return _UNSAFE_IN_A_LINE.sub(_escaped, text)
    return _UNSAFE.sub("", _SEQUENCE.sub("", text))


def printable_data(value: Any) -> Any:
    """Every string in a JSON value (keys too) made `printable`; the value must be one
    `parse_json` accepted (its depth is bounded)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [printable_data(item) for item in value]
    if isinstance(value, dict):
        return {printable(str(k)): printable_data(v) for k, v in value.items()}
    return value


class PrintableStream:
    """`printable` for a byte stream cut anywhere (a container's output): a control sequence
    or a UTF-8 character split across two chunks is held back until its end arrives."""

    HOLD = 256  # a sequence still open after this many characters is junk: let it go

    def __init__(self) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""

    def feed(self, chunk: bytes) -> bytes:
        text = self._held + self._decode.decode(chunk)
        open_at = _INTRODUCERS.search(text)
        tail = open_at.group() if open_at else ""
        if tail and len(tail) < self.HOLD and not any(end in tail for end in "\x07\n"):
            text, self._held = text[: -len(tail)], tail
        else:
            self._held = ""
        return printable(text).encode()

    def flush(self) -> bytes:
        """What is left at the end of the stream, cleaned (a sequence never finished is
        dropped whole)."""
        self._held = ""
        return printable(self._decode.decode(b"", final=True)).encode()


class UntrustedJSONError(FlowerError, ValueError):
    """Box-written JSON the host will not parse: too large, too deep, or not JSON."""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def _deeper_than(data: bytes, depth: int) -> bool:
    """Whether `data`'s arrays and objects nest deeper than `depth` (or do not close): the
    strings are dropped, then each pass removes the innermost pairs, C-speed, `depth` passes
    at most."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_A_BRACKET)
    for _ in range(depth):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"").replace(b"{}", b"")
    return bool(brackets)


def parse_json(
    data: bytes | str, *, limit: int = DEFAULT_JSON_LIMIT, depth: int = MAX_JSON_DEPTH
) -> Any:
    """`data` parsed as JSON, when it is at most `limit` bytes and nests at most `depth` deep.

    Raises:
        UntrustedJSONError: it is larger, deeper, or not JSON (the message says which).
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > limit:
        raise UntrustedJSONError(text("json.too_large", limit=limit))
    if _deeper_than(raw, depth):
        raise UntrustedJSONError(text("json.too_deep", depth=depth))
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise UntrustedJSONError(text("json.not_json", problem=exc)) from exc
