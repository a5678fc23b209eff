"""Hostile clients of the broker's ports, shared by the attack tests on a broker process
(tests/flowerbox/test_broker_hostile.py) and in its image (tests/docker/test_broker_flood.py).
Everything stays on loopback: the flood comes from 127.0.0.2, a run from 127.0.0.1."""

from __future__ import annotations

import contextlib
import resource
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from tests.flowerbox.test_broker_tcp import MESSAGES

MIB = 1024  # in KiB, as VmRSS counts
FLOOD_PEER = "127.0.0.2"  # loopback too: the flood's address, not the run's
HALF_HEAD = b"POST /v1/messages?beta=true HTTP/1.1\r\nhost: b"
T = TypeVar("T")


def head(
    *lines: str, length: int | None = None, method: str = "POST", target: str = MESSAGES
) -> bytes:
    """A request head (to the API unless told; no token unless a line gives one)."""
    sized = [] if length is None else [f"content-length: {length}"]
    text = "\r\n".join([f"{method} {target} HTTP/1.1", "host: broker", *lines, *sized])
    return (text + "\r\n\r\n").encode("latin-1")


def opened(port: int, *, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return sock


def answer_of(sock: socket.socket) -> bytes:
    """What the broker answered before it closed (a reset ends it too)."""
    got = b""
    with contextlib.suppress(OSError):
        while data := sock.recv(65536):
            got += data
    return got


@contextmanager
def pinned_bodies(port: int, *, count: int = 12, size: int = 31 << 20) -> Iterator[None]:
    """`count` token-less requests, each sending `size` bytes of a body 1 MiB longer and
    then holding the connection open until the block ends."""
    body = b"x" * size
    held = []
    try:
        for _ in range(count):
            sock = opened(port, source=FLOOD_PEER)
            held.append(sock)
            with contextlib.suppress(OSError):  # closed by the broker once it answered
                sock.sendall(head(length=size + (1 << 20)) + body)
        yield
    finally:
        for sock in held:
            sock.close()


@contextmanager
def idle_heads(
    port: int, *, count: int, meanwhile: Callable[[], T], every: int = 2_000
) -> Iterator[list[T]]:
    """`count` connections from one peer, each sending half a head and holding on (until
    the block ends); `meanwhile()` every `every` of them, its results yielded."""
    needed = count + 2_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"{count} client sockets need RLIMIT_NOFILE >= {needed} (hard: {hard})")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    held: list[socket.socket] = []
    results: list[T] = []
    try:
        for n in range(count):
            with contextlib.suppress(OSError):  # turned away: closed, or reset
                sock = opened(port, source=FLOOD_PEER)
                held.append(sock)
                sock.sendall(HALF_HEAD)
            if n % every == every - 1:
                results.append(meanwhile())
        yield results
    finally:
        for sock in held:
            sock.close()
