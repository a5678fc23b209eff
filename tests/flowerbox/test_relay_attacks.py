"""Attacks on the git relay by a run that holds its own token and talks to the relay with
raw requests (not git's): to push something other than its own branch, to reach another
repository through a target spelt otherwise, or to have its own push land without the
provenance note. Driven as test_gitrelay.py drives the relay (a loopback `git http-backend`
remote)."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from flowerbox.broker.gitroute import Refusal, route, serves
from tests.flowerbox.gitclient import BRANCH, RUN_TOKEN, Relay, commit
from tests.flowerbox.gitremote import git
from tests.flowerbox.test_gitnotes import noted
from tests.flowerbox.test_gitrelay import post


def pkt(text: str) -> bytes:
    return b"%04x" % (len(text) + 4) + text.encode()


def pack(relay: Relay, work: Path) -> bytes:
    """The pack of the clone's commits not on main."""
    return subprocess.run(
        ["git", "pack-objects", "--stdout", "--revs", "-q"], cwd=work, env=relay.env(),
        check=True, input=b"HEAD\n^origin/main\n", capture_output=True,
    ).stdout  # fmt: skip


def pushed_body(relay: Relay, work: Path, capabilities: str) -> bytes:
    """A receive-pack request creating the run's branch at the clone's HEAD: its one command
    with `capabilities`, a flush, and the pack of the commits new on it."""
    sha = git("rev-parse", "HEAD", cwd=work, env=relay.env()).strip()
    return pkt(f"{'0' * 40} {sha} {BRANCH}\0{capabilities}\n") + b"0000" + pack(relay, work)


def head(relay: Relay, length: int) -> bytes:
    return (
        f"POST /{relay.remote.host}/app.git/git-receive-pack HTTP/1.1\r\n"
        f"Host: relay\r\nAuthorization: Bearer {RUN_TOKEN}\r\n"
        "Content-Type: application/x-git-receive-pack-request\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def landed(relay: Relay, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if BRANCH in relay.remote.branches("app"):
            return True
        time.sleep(0.05)
    return False


def test_a_push_that_asks_for_no_report_is_refused_as_it_could_never_be_noted(
    relay: Relay,
) -> None:
    """Without report-status the remote says nothing of what it updated, so the relay could
    never know to note the push: such a push would land with no note at all."""
    work = relay.clone()
    commit(relay, work)
    answer = post(relay, pushed_body(relay, work, "ofs-delta agent=attacker"))
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:200]
    assert b"report-status" in answer
    assert BRANCH not in relay.remote.branches("app")
    assert relay.pushes_upstream() == 0


def test_a_client_gone_before_the_report_still_gets_its_push_noted(relay: Relay) -> None:
    """The run sends its push, waits until the remote has updated its branch, and resets the
    connection before the remote's report comes: the relay reads that report all the same,
    and notes the push."""
    hook = relay.remote.root / "app.git" / "hooks" / "reference-transaction"
    hook.write_text('#!/bin/sh\n[ "$1" = committed ] && sleep 2\nexit 0\n')
    hook.chmod(0o755)
    work = relay.clone()
    sha = commit(relay, work)
    body = pushed_body(relay, work, "report-status side-band-64k ofs-delta agent=attacker")
    sock = socket.create_connection(relay.relay.server_address, timeout=30)
    sock.sendall(head(relay, len(body)) + body)
    assert landed(relay)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # a reset: the relay's answer cannot be sent
    (line,) = noted(relay)
    assert line["note"] == "written" and line["commits"] == 1
    shown = git("notes", "--ref=flowerbox", "show", sha, cwd=relay.remote.root / "app.git",
                env=relay.remote.env)  # fmt: skip
    assert shown.startswith("flowerbox-run: ")


REPO = "https://github.com/acme/app.git"


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("GET", "/github.com/acme/%2e%2e/acme/other.git/info/refs?service=git-upload-pack"),
        ("GET", "/github.com/acme/app.git%2F..%2Fother.git/info/refs?service=git-upload-pack"),
        ("GET", "/github.com/acme/../acme/other.git/info/refs?service=git-upload-pack"),
        ("GET", "/github.com/acme/./app.git/info/refs?service=git-upload-pack"),
        ("GET", "//github.com/acme/app.git/info/refs?service=git-upload-pack"),
        ("GET", "/github.com//acme/app.git/info/refs?service=git-upload-pack"),
        ("GET", "/GITHUB.COM/acme/app.git/info/refs?service=git-upload-pack"),
        ("GET", "/github.com:443/acme/app.git/info/refs?service=git-upload-pack"),
        ("GET", "/x@github.com/acme/app.git/info/refs?service=git-upload-pack"),
        ("GET", "/github.com/acme/app.git/info/refs?service=git-upload-pack&x="),
        ("GET", "/github.com/acme/app.git/info/refs?service=git-receive-pack#x"),
        ("GET", "http://github.com/acme/app.git/info/refs?service=git-upload-pack"),
        ("POST", "/github.com/acme/app.git/git-receive-pack?x=1"),
        ("POST", "/github.com/acme/app.git/info/refs/git-receive-pack"),
        ("POST", "/github.com/git-receive-pack"),
    ],
)
def test_a_target_that_is_not_plainly_the_runs_repository_is_not_served(
    method: str, target: str
) -> None:
    """Percent-escapes, dot segments, empty segments, another spelling of the host, extra
    query parameters: each is refused by the route or is not the run's repository."""
    where = route(method, target)
    assert isinstance(where, Refusal) or not serves(where, REPO), where
    plain = route("GET", "/github.com/acme/app.git/info/refs?service=git-upload-pack")
    assert not isinstance(plain, Refusal) and serves(plain, REPO)  # the control


def test_a_second_command_list_after_a_flush_updates_nothing(relay: Relay) -> None:
    """Attack: the run's own command, a flush, then a command for main (as if push options
    or a second list followed); or a flush first (git's probe) and then a command for main.
    The relay judges the first list only; what follows is pack data to the remote, which
    applies none of it."""
    work = relay.clone()
    commit(relay, work)
    sha = git("rev-parse", "HEAD", cwd=work, env=relay.env()).strip()
    main = git("rev-parse", "origin/main", cwd=work, env=relay.env()).strip()
    to_main = pkt(f"{main} {sha} refs/heads/main\0report-status\n")
    own = pkt(f"{'0' * 40} {sha} {BRANCH}\0report-status\n")
    packed = pack(relay, work)
    before = relay.remote.branches("app")
    for body in (own + b"0000" + to_main + b"0000" + packed, b"0000" + to_main + b"0000" + packed):
        post(relay, body)
        assert relay.remote.branches("app") == before


def test_a_commit_the_remote_has_under_a_tag_alone_gets_no_runs_note(relay: Relay) -> None:
    """Attack: the run points its branch at a commit someone else made, which the remote
    has under a tag only (no branch), so that the relay notes it as the run's."""
    seed, env = relay.remote.root / "app-seed", relay.remote.env
    (seed / "release.txt").write_text("a person's release\n")
    git("add", "release.txt", cwd=seed, env=env)
    git("commit", "-q", "-m", "release", cwd=seed, env=env)
    git("tag", "v1", cwd=seed, env=env)
    git("push", "-q", str(relay.remote.root / "app.git"), "v1", cwd=seed, env=env)
    theirs = git("rev-parse", "v1", cwd=seed, env=env).strip()
    work = relay.clone()
    git("checkout", "-q", "--detach", theirs, cwd=work, env=relay.env())
    commit(relay, work)  # the run's own, on top of theirs
    done = relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work)
    assert done.returncode == 0, done.stderr
    (line,) = noted(relay)
    assert line["note"] == "written" and line["commits"] == 1
