"""The one redaction every header, note and log line passes before it is written anywhere
(a ledger row, a JSON log line, stderr) or shown to a client.

    redactor = Redactor(credentials.secrets())    # the real key, the git credential...
    redactor.know_token_hash(sha256_of_run_token)  # each run token, as the broker learns it
    redactor.note(text)   # redacted, one line, at most NOTE_LIMIT characters
    redactor.redact(text) # redacted, as long as it was (an answer's JSON)

What a client sends is quoted in records (a refused header line, a reason with the request
target), and a malformed line such as `x-api-key : TOKEN` (space before the colon) is still
a credential. So besides the secrets it is given, it knows the formats:
- the value of an `x-api-key`, `authorization`, `proxy-authorization` or `cookie` header,
  however the line around it is spelt (`name:v`, `name : v`, `name=v`), to the end of it;
- what follows `Bearer` or `Basic`, and anything shaped like an Anthropic key (`sk-ant-...`);
- a word of 16 or more token characters whose SHA-256 is a run token the broker knows (the
  broker keeps the hashes only), and any word of 32 or more letters, digits, `-` and `_`
  with both letters and digits that is not plain hex (an object id, a digest): a token it
  does not know is still one.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable

from flower import printable

__all__ = ["NOTE_LIMIT", "REDACTED", "Redactor"]

NOTE_LIMIT = 300  # characters of a note, a reason or a log line
REDACTED = "<redacted>"
_READ = 16 * 1024  # of a longer text only the start is looked at: the note is cut anyway
_HEADER = re.compile(
    r"(?i)\b(x-api-key|authorization|proxy-authorization|cookie)(\s*[:=]\s*)[^\r\n'\"\\]*"
)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+")
_ANTHROPIC = re.compile(r"sk-ant-[A-Za-z0-9_-]*")
_WORD = re.compile(r"[A-Za-z0-9._~+/=-]{16,}")
_PIECES = re.compile(r"[A-Za-z0-9_-]{16,}")  # a word's urlsafe pieces (`key=TOKEN`, `/p/TOKEN`)
_TOKENISH = re.compile(r"[A-Za-z0-9_-]{32,}")
_HEX = re.compile(r"[0-9a-fA-F-]+")
_DIGIT, _LETTER = re.compile(r"[0-9]"), re.compile(r"[A-Za-z]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Redactor:
    """Knows the secrets of one process (given at start) and its run tokens' hashes (learned
    as runs are); safe to share between threads."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self._hashes: set[str] = set()
        self._lock = threading.Lock()
        for secret in secrets:
            self.know_secret(secret)

    def know_secret(self, secret: str) -> None:
        if len(secret) < 3:
            return
        with self._lock:  # longest first, so a secret containing another is replaced whole
            self._secrets = sorted({*self._secrets, secret}, key=len, reverse=True)

    def know_token_hash(self, sha256: str) -> None:
        with self._lock:
            self._hashes.add(sha256)

    def redact(self, text: str) -> str:
        """`text` with every secret and credential-shaped value replaced."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        text = _HEADER.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)
        text = _SCHEME.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)
        text = _ANTHROPIC.sub(REDACTED, text)
        text = _WORD.sub(self._known, text)
        return _TOKENISH.sub(_random_looking, text)

    def note(self, text: str, limit: int = NOTE_LIMIT) -> str:
        """What may be written down: terminal control sequences removed whole (a title-setting
        sequence leaves no payload behind), redacted, the other control characters replaced,
        cut to `limit`."""
        cut = text[:_READ]
        shown = _CONTROL.sub("?", self.redact(printable(cut)))
        if len(shown) > limit or len(cut) < len(text):
            return shown[:limit] + f"... ({len(text)} characters)"
        return shown

    def _known(self, word: re.Match[str]) -> str:
        """The word, or its pieces, replaced where it is a known run token."""
        if self._is_token(word[0]):
            return REDACTED
        return _PIECES.sub(lambda m: REDACTED if self._is_token(m[0]) else m[0], word[0])

    def _is_token(self, text: str) -> bool:
        digest = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            return digest in self._hashes


def _random_looking(word: re.Match[str]) -> str:
    text = word[0]
    if _HEX.fullmatch(text) or not (_DIGIT.search(text) and _LETTER.search(text)):
        return text
    return REDACTED
