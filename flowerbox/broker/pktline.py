"""A git push's command list, read strictly and bounded, so that the git relay
(flowerbox.broker.gitrelay) can judge a push before a byte of it goes upstream.

    head = read_push(chunks)        # chunks: the receive-pack request body as it arrives
    head.commands                   # (Command(old, new, ref), ...)
    head.read                       # every byte taken off `chunks`: forwarded first
    report(head, "why")             # git's answer refusing each of them, as receive-pack's
    status = Status(head.capabilities); status.feed(chunk) ...; status.updated()
                                    # the remote's answer: which refs it reports `ok`

A request of a flush packet alone is git's probe before a long body (remote-curl sends
one to see that the remote answers): it updates nothing, and has no commands here.

The request, as git sends it (gitprotocol-pack(5), "Reference Update Request"):

    *("shallow" SP oid)  old SP new SP ref NUL capabilities  *(old SP new SP ref)  flush
    [*push-option flush]            only when the capabilities name `push-options`
                                    (receive-pack takes `push-options=<anything>` too)
    pack data                       not read here: the relay forwards it as it comes

Refused with `PushError` (the relay answers 400): a length that is not four hex digits, or
outside 5..65520; a special packet other than flush (0001, 0002); a line that is neither a
shallow line nor a command (a push certificate included); capabilities after the first
command; more than `MAX_LINES` lines or `MAX_HEAD` bytes before the pack; a body that ends
inside the list. This is hostile input read by the process that holds the git credential:
each length is checked before it is used, and nothing is read past what the list needs.

The remote's answer to a push (gitprotocol-pack(5), "Report Status"), read by `Status` as
the relay passes it on: in band 1 of the side band when the client asked for one (band 2,
the remote's progress, is dropped; band 3 is its fatal error), `unpack ok`, then `ok REF` or
`ng REF reason` a ref (and `option` lines in report-status-v2), then a flush. Bounded: at
most `MAX_STATUS` bytes of it are kept; anything else makes it report no ref updated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from flower import text
from flowerbox.errors import BadRequest

__all__ = [
    "MAX_HEAD", "MAX_LINES", "MAX_STATUS", "Command", "PushError", "PushHead", "Status",
    "read_push", "report", "unsafe_capability",
]  # fmt: skip

MAX_PKT = 65520  # git's LARGE_PACKET_MAX: the longest pkt-line, its 4 length bytes included
MAX_LINES = 1024  # shallow lines, commands and push options together
MAX_HEAD = 1 << 20  # bytes read before the pack: far above any list the relay would allow
MAX_STATUS = 64 * 1024  # a report of one ref is a few hundred bytes
REPORTS = frozenset({"report-status", "report-status-v2"})
BANDS = {"side-band-64k": MAX_PKT - 5, "side-band": 1000 - 5}  # data per band-1 packet
# The capabilities a push may ask for: none changes what the forge does with the ref
# (`atomic` only makes a one-ref push all-or-nothing). receive-pack takes a name followed
# by `=` as that name (`push-options=1` is `push-options`), so only the valued ones below
# may carry a value. Anything else is refused: `push-options` (a forge acts on them:
# GitLab's merge_request.*, ci.skip), `push-cert` (a signed push the forge records and may
# act on), and any name git learns later.
SAFE_CAPABILITIES = frozenset(
    {"report-status", "report-status-v2", "side-band", "side-band-64k", "quiet", "atomic",
     "ofs-delta"}
)  # fmt: skip
VALUED_CAPABILITIES = frozenset({"agent", "session-id", "object-format"})
_LENGTH = re.compile(rb"[0-9a-f]{4}")
_OID = r"(?:[0-9a-f]{40}|[0-9a-f]{64})"
_COMMAND = re.compile(rf"({_OID}) ({_OID}) (refs/[!-~]+)")  # a ref name has no space or control
_SHALLOW = re.compile(rf"shallow {_OID}")


class PushError(BadRequest):
    """A receive-pack request the relay will not read (answered 400)."""


@dataclass(frozen=True)
class Command:
    """One ref update: `old` to `new` (all zeros: create, or delete)."""

    old: str
    new: str
    ref: str

    @property
    def deletes(self) -> bool:
        return not self.new.strip("0")

    def shown(self) -> dict[str, str]:
        return {"ref": self.ref, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class PushHead:
    """What comes before the pack: the commands, the first line's capabilities, the push
    options, and `read`, every byte taken off the body so far (the pack's first bytes too)."""

    commands: tuple[Command, ...]
    capabilities: tuple[str, ...]
    options: tuple[str, ...]
    read: bytes


class _Packets:
    """pkt-lines off a stream of chunks, never holding more than MAX_HEAD (+ one chunk)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.buffer = bytearray()
        self._at = 0
        self.lines = 0

    def next(self) -> str | None:
        """The next pkt-line's text without its one trailing LF; None for a flush packet."""
        length = self._take(4)
        if not _LENGTH.fullmatch(length):
            raise PushError(text("broker.pkt_length", length=repr(length)))
        size = int(length, 16)
        if size == 0:
            return None
        if size < 5 or size > MAX_PKT:
            raise PushError(text("broker.pkt_size", size=size, most=MAX_PKT))
        self.lines += 1
        if self.lines > MAX_LINES:
            raise PushError(text("broker.pkt_lines", most=MAX_LINES))
        payload = self._take(size - 4)
        try:
            decoded = payload.decode("ascii")
        except UnicodeDecodeError:
            raise PushError(text("broker.pkt_ascii")) from None
        return decoded.removesuffix("\n")

    def _take(self, count: int) -> bytes:
        while len(self.buffer) - self._at < count:
            if len(self.buffer) > MAX_HEAD:
                raise PushError(text("broker.pkt_head", most=MAX_HEAD))
            chunk = next(self._chunks, None)
            if chunk is None:
                raise PushError(text("broker.pkt_ended"))
            self.buffer += chunk
        data = bytes(self.buffer[self._at : self._at + count])
        self._at += count
        return data


def read_push(chunks: Iterator[bytes]) -> PushHead:
    """Read the command list (and push options) off the body's first chunks.

    Raises:
        PushError: the list breaks a rule in the module docstring.
    """
    packets = _Packets(chunks)
    line = packets.next()
    while line is not None and _SHALLOW.fullmatch(line):
        line = packets.next()
    if line is None:  # git's probe before a large push: nothing to update
        return PushHead((), (), (), bytes(packets.buffer))
    first, _, features = line.partition("\0")
    commands = [_command(first)]
    while (line := packets.next()) is not None:
        if "\0" in line:
            raise PushError(text("broker.pkt_capabilities"))
        commands.append(_command(line))
    capabilities = tuple(features.split())
    options: list[str] = []
    if any(c.partition("=")[0] == "push-options" for c in capabilities):
        while (line := packets.next()) is not None:
            options.append(line)
    return PushHead(tuple(commands), capabilities, tuple(options), bytes(packets.buffer))


def unsafe_capability(capabilities: tuple[str, ...]) -> str | None:
    """The first capability of a push that may change what the forge does (or that the
    relay does not know), for its refusal; None when all are safe. Judged from the list
    alone, before anything goes upstream."""
    for capability in capabilities:
        name, valued, _ = capability.partition("=")
        if capability in SAFE_CAPABILITIES or (valued and name in VALUED_CAPABILITIES):
            continue
        return capability[:60]
    return None


def _command(line: str) -> Command:
    found = _COMMAND.fullmatch(line)
    if found is None:
        raise PushError(text("broker.pkt_not_command", line=repr(line[:120])))
    old, new, ref = found.groups()
    if len(old) != len(new):
        raise PushError(text("broker.pkt_oid_lengths"))
    return Command(old, new, ref)


def report(head: PushHead, reason: str) -> bytes | None:
    """receive-pack's report refusing every command of `head` with `reason` (as a refusing
    pre-receive hook's: "unpack ok", then "ng REF REASON"), in the side band the client
    asked for; None when it asked for no report (git then sees an HTTP error alone)."""
    if not REPORTS & set(head.capabilities):
        return None
    lines = ["unpack ok\n", *(f"ng {c.ref} {reason}\n" for c in head.commands)]
    inner = b"".join(_packet(line.encode()) for line in lines) + b"0000"
    band = next((BANDS[b] for b in BANDS if b in head.capabilities), None)
    if band is None:
        return inner
    parts = (inner[at : at + band] for at in range(0, len(inner), band))
    return b"".join(_packet(b"\x01" + part) for part in parts) + b"0000"


def _packet(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


class Status:
    """The remote's report on a push, fed the answer's bytes as they pass; `updated()` are
    the refs it reported `ok`. A report that was not asked for, is cut short, breaks a rule
    of the protocol, passes MAX_STATUS, says the pack did not unpack, or carries the
    remote's fatal error reports none."""

    def __init__(self, capabilities: tuple[str, ...]) -> None:
        self._banded = any(band in capabilities for band in BANDS)
        self._wire = bytearray()  # side-band packets not yet whole
        self._report = bytearray()
        self._ended = False
        self._broken = not REPORTS & set(capabilities)

    def feed(self, data: bytes) -> None:
        if self._broken or self._ended:
            return
        if not self._banded:
            self._keep(data)
            return
        self._wire += data
        while len(self._wire) >= 4 and not (self._broken or self._ended):
            length = bytes(self._wire[:4])
            size = int(length, 16) if _LENGTH.fullmatch(length) else -1
            if size == 0:
                self._ended = True
            elif size < 5 or size > MAX_PKT:
                self._broken = True
            elif len(self._wire) < size:
                return
            else:
                band, payload = self._wire[4], bytes(self._wire[5:size])
                del self._wire[:size]
                if band == 1:
                    self._keep(payload)
                elif band != 2:  # 3: the remote's fatal error; anything else: not git
                    self._broken = True

    def _keep(self, data: bytes) -> None:
        if len(self._report) + len(data) > MAX_STATUS:
            self._broken = True
        else:
            self._report += data

    def updated(self) -> frozenset[str]:
        if self._broken or (self._banded and not self._ended):
            return frozenset()
        lines = _Packets(iter([bytes(self._report)]))
        ok: set[str] = set()
        try:
            if lines.next() != "unpack ok":
                return frozenset()
            while (line := lines.next()) is not None:
                if line.startswith("ok "):
                    ok.add(line.removeprefix("ok "))
                elif not line.startswith(("ng ", "option ")):
                    return frozenset()
        except PushError:
            return frozenset()
        return frozenset(ok)
