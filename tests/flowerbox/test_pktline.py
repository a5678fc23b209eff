"""The push's command list as the relay reads it (flowerbox.broker.pktline), and what it lets
a run push and reach (flowerbox.broker.gitroute): plain calls on hostile bytes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowerbox.broker.gitroute import Refusal, Route, push_refusal, route, serves
from flowerbox.broker.pktline import (
    MAX_HEAD,
    MAX_LINES,
    MAX_STATUS,
    Command,
    PushError,
    Status,
    read_push,
    report,
    unsafe_capability,
)

RUN = "20261202-060000-abc123"
OLD, NEW, ZERO = "1" * 40, "2" * 40, "0" * 40
OWN = f"refs/flowerbox/{RUN}"


def pkt(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"%04x" % (len(data) + 4) + data


def chunks(data: bytes, size: int = 7) -> Iterator[bytes]:
    """The body as it may arrive: cut anywhere, a pkt-line's length included."""
    return iter([data[i : i + size] for i in range(0, len(data), size)])


def push(*lines: str, tail: bytes = b"PACK...") -> bytes:
    return b"".join(pkt(line) for line in lines) + b"0000" + tail


def test_a_push_of_the_runs_branch_is_read_with_its_capabilities() -> None:
    body = push(f"{OLD} {NEW} {OWN}\0report-status side-band-64k agent=git/2.39\n")
    head = read_push(chunks(body))
    assert head.commands == (Command(OLD, NEW, OWN),)
    assert head.capabilities == ("report-status", "side-band-64k", "agent=git/2.39")
    assert head.options == ()
    assert body.startswith(head.read)  # what was read is forwarded first, unchanged
    assert push_refusal(head, OWN) is None


def test_shallow_lines_and_sha256_ids_are_read() -> None:
    old, new = "a" * 64, "b" * 64
    head = read_push(chunks(push(f"shallow {'c' * 40}", f"{old} {new} {OWN}\0atomic")))
    assert head.commands == (Command(old, new, OWN),)


@pytest.mark.english
def test_push_options_are_read_after_the_commands_and_refused() -> None:
    body = push(f"{OLD} {NEW} {OWN}\0push-options", tail=pkt("ci.skip") + b"0000PACK")
    head = read_push(chunks(body))
    assert head.options == ("ci.skip",)
    assert push_refusal(head, OWN) == "push options are refused (a forge may act on them)"


def test_push_options_spelt_with_a_value_are_read_as_push_options() -> None:
    """receive-pack takes `push-options=<x>` as `push-options`: so does the reader."""
    body = push(f"{OLD} {NEW} {OWN}\0report-status push-options=1", tail=pkt("ci.skip") + b"0000")
    assert read_push(chunks(body)).options == ("ci.skip",)


@pytest.mark.parametrize(
    ("capabilities", "unsafe"),
    [
        ("report-status side-band-64k quiet atomic ofs-delta agent=git/2.47", None),
        ("report-status-v2 side-band session-id=x object-format=sha1", None),
        ("report-status push-options", "push-options"),
        ("report-status push-options=1", "push-options=1"),
        ("report-status push-cert=1234-abcd", "push-cert=1234-abcd"),
        ("report-status side-band-64k=1", "side-band-64k=1"),
        ("report-status something-git-adds-later", "something-git-adds-later"),
        ("report-status " + "x" * 500, "x" * 60),
    ],
)
def test_only_capabilities_that_change_nothing_at_the_forge_pass(
    capabilities: str, unsafe: str | None
) -> None:
    assert unsafe_capability(tuple(capabilities.split())) == unsafe


def test_a_flush_alone_is_gits_probe_and_updates_nothing() -> None:
    head = read_push(chunks(b"0000"))
    assert head.commands == () and push_refusal(head, OWN) is None


@pytest.mark.english
@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ([f"{OLD} {NEW} refs/heads/main"], "refs/heads/main is not this run's ref"),
        ([f"{OLD} {NEW} {OWN}", f"{OLD} {NEW} refs/heads/x"], "a push of 2 refs"),
        ([f"{OLD} {NEW} {OWN}", f"{OLD} {NEW} {OWN}"], "a push of 2 refs"),
        ([f"{OLD} {ZERO} {OWN}"], f"deleting {OWN} is refused"),
        ([f"{OLD} {NEW} {OWN}x"], "is not this run's ref"),
        ([f"{OLD} {NEW} refs/heads/flowerbox/{RUN}/x"], "is not this run's ref"),
    ],
)
def test_any_other_update_is_refused(lines: list[str], reason: str) -> None:
    refused = push_refusal(read_push(chunks(push(*lines))), OWN)
    assert refused is not None and reason in refused


@pytest.mark.english
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"ffff" + b"x" * 100, "a pkt-line length of 65535"),
        (b"0004", "a pkt-line length of 4"),
        (b"0001", "a pkt-line length of 1"),
        (b"00zz", "not four hex digits"),
        (b"00A0", "not four hex digits"),
        (b"00", "ended inside its command list"),
        (pkt(f"{OLD} {NEW} {OWN}"), "ended inside its command list"),
        (push(f"{OLD} {NEW}  {OWN}"), "not a ref update"),
        (push(f"{OLD} {NEW} {OWN} "), "not a ref update"),
        (push(f"{OLD} {NEW} refs/heads/a\tb"), "not a ref update"),
        (push(f"{OLD[:39]} {NEW} {OWN}"), "not a ref update"),
        (push(f"{OLD} {'b' * 64} {OWN}"), "different lengths"),
        (push(f"{OLD} {NEW} {OWN}\0a", f"{OLD} {NEW} {OWN}\0b"), "capabilities after the first"),
        (push("push-cert\0report-status", "certificate version 0.1"), "not a ref update"),
        (push(f"{OLD} {NEW} {OWN}".replace("1", "\u00e9", 1)), "not ASCII"),
    ],
)
def test_a_malformed_command_list_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(PushError, match=message) as caught:
        read_push(chunks(body))
    assert caught.value.status == 400


@pytest.mark.english
def test_every_count_is_bounded() -> None:
    many = push(*[f"shallow {'c' * 40}"] * (MAX_LINES + 1))
    with pytest.raises(PushError, match=f"more than {MAX_LINES} lines"):
        read_push(chunks(many, 65536))
    endless = iter([b"ffef" + b"y" * 65516] * 10_000)  # 655 MB if it were all read
    with pytest.raises(PushError):
        read_push(endless)


@pytest.mark.english
def test_the_head_is_never_held_past_its_bound() -> None:
    """Push options are the one free text: 40 of 64 KB each would be 2.6 MB before the pack."""
    options = pkt(b"o" * 65000) * 40
    body = push(f"{OLD} {NEW} {OWN}\0push-options", tail=options + b"0000PACK")
    pulled = 0

    def counted() -> Iterator[bytes]:
        nonlocal pulled
        for chunk in chunks(body, 65536):
            pulled += len(chunk)
            yield chunk

    with pytest.raises(PushError, match=f"more than {MAX_HEAD} bytes before the pack"):
        read_push(counted())
    assert pulled <= MAX_HEAD + 65536


@pytest.mark.parametrize(
    ("method", "target", "expected"),
    [
        ("GET", "/github.com/acme/app.git/info/refs?service=git-upload-pack",
         Route("github.com", "/acme/app.git", "git-upload-pack", advertise=True)),
        ("GET", "/127.0.0.1:8443/app.git/info/refs?service=git-receive-pack",
         Route("127.0.0.1:8443", "/app.git", "git-receive-pack", advertise=True)),
        ("POST", "/github.com/acme/app.git/git-receive-pack",
         Route("github.com", "/acme/app.git", "git-receive-pack", advertise=False)),
    ],
)  # fmt: skip
def test_smart_http_is_routed(method: str, target: str, expected: Route) -> None:
    assert route(method, target) == expected


@pytest.mark.parametrize(
    ("method", "target", "status"),
    [
        ("PUT", "/github.com/acme/app.git/git-receive-pack", 405),
        ("HEAD", "/github.com/acme/app.git/info/refs?service=git-upload-pack", 405),
        ("GET", "/github.com/acme/app.git/info/refs", 404),  # dumb HTTP
        ("GET", "/github.com/acme/app.git/HEAD", 404),
        ("GET", "/github.com/acme/app.git/objects/info/packs", 404),
        ("GET", "/github.com/acme/app.git/info/refs?service=git-upload-archive", 404),
        ("GET", "/github.com/acme/app.git/info/refs?service=git-upload-pack&x=1", 404),
        ("POST", "/github.com/acme/app.git/git-receive-pack?x=1", 404),
        ("POST", "/github.com/acme/../other.git/git-receive-pack", 404),
        ("POST", "/github.com/acme/./app.git/git-receive-pack", 404),
        ("POST", "/github.com//app.git/git-receive-pack", 404),
        ("POST", "/github.com/acme/%2e%2e/app.git/git-receive-pack", 404),
        ("POST", "/user:pw@github.com/app.git/git-receive-pack", 404),
        ("POST", "/GitHub.com/app.git/git-receive-pack", 404),
        ("POST", "/github.com/git-receive-pack", 404),
        ("POST", "github.com/app.git/git-receive-pack", 404),
        ("POST", "http://github.com/app.git/git-receive-pack", 404),
    ],
)
def test_anything_else_is_refused(method: str, target: str, status: int) -> None:
    refused = route(method, target)
    assert isinstance(refused, Refusal) and refused.status == status


def test_a_run_reaches_its_own_repository_only() -> None:
    where = route("GET", "/github.com/acme/app.git/info/refs?service=git-upload-pack")
    assert isinstance(where, Route)
    assert serves(where, "https://github.com/acme/app.git")
    assert serves(where, "https://GitHub.com/acme/app.git/")
    for other in [
        "https://github.com/acme/app",
        "https://github.com/acme/other.git",
        "https://gitlab.com/acme/app.git",
        "http://github.com/acme/app.git",
        "https://bot:pw@github.com/acme/app.git",
        "https://github.com/acme/app.git?x=1",
        "git@github.com:acme/app.git",
    ]:
        assert not serves(where, other), other


def unpacket(data: bytes) -> list[bytes]:
    """pkt-lines back into payloads (b"" for a flush)."""
    found = []
    while data:
        size = int(data[:4], 16)
        found.append(data[4:size] if size else b"")
        data = data[max(size, 4) :]
    return found


def test_a_refusal_is_receive_packs_own_report_in_the_side_band_asked_for() -> None:
    lines = [f"{OLD} {NEW} refs/heads/main\0report-status side-band-64k", f"{OLD} {NEW} {OWN}"]
    head = read_push(chunks(push(*lines)))
    answer = report(head, "why")
    assert answer is not None
    outer = unpacket(answer)
    assert outer[-1] == b"" and all(p.startswith(b"\x01") for p in outer[:-1])
    inner = unpacket(b"".join(p[1:] for p in outer[:-1]))
    assert inner == [
        b"unpack ok\n",
        b"ng refs/heads/main why\n",
        b"ng " + OWN.encode() + b" why\n",
        b"",
    ]


def test_a_refusal_without_side_band_is_the_report_alone() -> None:
    head = read_push(chunks(push(f"{OLD} {NEW} refs/heads/main\0report-status")))
    assert report(head, "why") == b"000eunpack ok\n001bng refs/heads/main why\n0000"


def test_a_client_that_asked_for_no_report_gets_none() -> None:
    head = read_push(chunks(push(f"{OLD} {NEW} refs/heads/main\0side-band-64k")))
    assert report(head, "why") is None


BANDED = ("report-status", "side-band-64k")


def banded(inner: bytes, *, band: int = 1) -> bytes:
    """`inner` in side-band packets of `band`, as receive-pack answers, then a flush."""
    return b"".join(pkt(bytes([band]) + inner[i : i + 100]) for i in range(0, len(inner), 100))


def status(answer: bytes, capabilities: tuple[str, ...] = BANDED) -> frozenset[str]:
    reading = Status(capabilities)
    for chunk in chunks(answer, 5):  # cut anywhere, a length included
        reading.feed(chunk)
    return reading.updated()


OK = pkt("unpack ok\n") + pkt(f"ok {OWN}\n") + b"0000"


def test_the_remotes_report_says_which_refs_it_updated() -> None:
    progress = pkt(b"\x02" + b"remote: resolving deltas\n" * 20)
    assert status(progress + banded(OK) + progress + b"0000") == {OWN}
    assert status(OK, ("report-status",)) == {OWN}
    v2 = pkt("unpack ok\n") + pkt(f"ok {OWN}\n") + pkt(f"option refname {OWN}\n") + b"0000"
    assert status(banded(v2) + b"0000", ("report-status-v2", "side-band-64k")) == {OWN}


@pytest.mark.parametrize(
    ("answer", "capabilities"),
    [
        (banded(pkt("unpack ok\n") + pkt(f"ng {OWN} declined\n") + b"0000") + b"0000", BANDED),
        (banded(pkt("unpack eof\n") + pkt(f"ok {OWN}\n") + b"0000") + b"0000", BANDED),
        (banded(OK), BANDED),  # no closing flush: the answer was cut
        (OK[:-4], ("report-status",)),
        (banded(OK) + banded(b"fatal\n", band=3) + b"0000", BANDED),
        (banded(OK, band=5) + b"0000", BANDED),
        (b"zzzz" + banded(OK) + b"0000", BANDED),
        (banded(pkt("unpack ok\n") + pkt(f"what {OWN}\n") + b"0000") + b"0000", BANDED),
        (banded(OK) + b"0000", ("side-band-64k",)),  # no report was asked for
        (banded(pkt(b"\x02" + b"x" * 60000) * 2 + OK) + b"0000", BANDED),  # over MAX_STATUS
    ],
    ids=["ng", "unpack-failed", "cut", "cut-plain", "fatal-band", "no-band", "bad-length",
         "not-a-status", "not-asked", "too-long"],
)  # fmt: skip
def test_any_other_report_says_no_ref_was_updated(
    answer: bytes, capabilities: tuple[str, ...]
) -> None:
    assert status(answer, capabilities) == frozenset()


def test_the_report_is_never_held_past_its_bound() -> None:
    reading = Status(BANDED)
    for _ in range(MAX_STATUS // 60000 + 2):
        reading.feed(pkt(b"\x01" + b"x" * 60000))
    assert len(reading._report) <= MAX_STATUS  # noqa: SLF001 - the bound is the point
