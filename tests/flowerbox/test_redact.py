"""The one redaction every record of the gateway and the broker passes
(flowerbox.sidecar.redact): plain calls on what a hostile client may send."""

from __future__ import annotations

import hashlib

import pytest

from flowerbox.sidecar.redact import NOTE_LIMIT, REDACTED, Redactor

RUN_TOKEN = "Zq3x-7Hk_pL2mN9vR4tY"  # shorter than the random-looking rule: known by hash only


def redactor() -> Redactor:
    known = Redactor(["sk-real-key-0123"])
    known.know_token_hash(hashlib.sha256(RUN_TOKEN.encode()).hexdigest())
    return known


@pytest.mark.parametrize(
    "text",
    [
        f"bytearray(b'x-api-key : {RUN_TOKEN}')",  # h11's message for a refused line
        f"authorization :Bearer {RUN_TOKEN}",
        f"Proxy-Authorization: Basic {RUN_TOKEN}",
        f"cookie={RUN_TOKEN}",
        f"refused: unknown token {RUN_TOKEN}",
        f"/v1/messages?key={RUN_TOKEN}",
        "the key sk-real-key-0123 leaked",
        "sk-ant-api03-" + "a1" * 20,
        "x" * 20 + "0123456789abcdefghij",  # 40 random-looking characters, unknown
    ],
)
def test_a_credential_in_any_spelling_is_written_nowhere(text: str) -> None:
    note = redactor().note(text)
    assert REDACTED in note
    for secret in (RUN_TOKEN, "sk-real-key-0123", "a1" * 20, "0123456789abcdefghij"):
        assert secret not in note


@pytest.mark.parametrize(
    "text",
    [
        "refs/heads/flowerbox/20261205-000000-aaaaaa " + "0f" * 20,
        "POST /v1/messages?beta=true 200 claude-opus-5-5 in=10 out=2 $0.0001 12ms",
        "registry.example/flowerbox@sha256:" + "ab" * 32,
    ],
)
def test_what_is_no_credential_stays_readable(text: str) -> None:
    assert redactor().note(text) == text


def test_a_note_is_one_bounded_line() -> None:
    note = redactor().note("a\x1b[31m\nb" + "word " * 20_000)
    assert len(note) <= NOTE_LIMIT + 40 and "\x1b" not in note and "\n" not in note
    assert note.endswith("(100008 characters)")


def test_a_terminal_sequence_is_written_down_as_nothing_not_as_its_payload() -> None:
    note = redactor().note("\x1b]0;pwned\x07evil-model \x1b[2Jx\x9b31my\tz")
    assert note == "evil-model xy?z"
