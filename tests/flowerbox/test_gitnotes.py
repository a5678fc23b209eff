"""The provenance note on a cluster run's branch, written by the broker's git relay once the
remote has taken the run's push: driven as test_gitrelay.py drives the relay (a run's real
git through the relay, a loopback `git http-backend` remote), read back from the remote
as a team would (`git log --notes=flowerbox`)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from flowerbox import __version__
from flowerbox.note import NOTES_REF
from tests.flowerbox.gitclient import (
    BRANCH,
    IMAGE,
    NAMESPACE,
    NETWORK,
    OTHER_IMAGE,
    OTHER_RUN,
    OTHER_TOKEN,
    RUN,
    RUN_TOKEN,
    Relay,
    commit,
)
from tests.flowerbox.gitremote import BASIC, TOKEN, git

OTHER_BRANCH = f"refs/flowerbox/{OTHER_RUN}"


def noted(relay: Relay, count: int = 1, timeout: float = 60.0) -> list[dict[str, Any]]:
    """The relay's note lines once there are `count` (it writes a note after its answer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = relay.notes()
        if len(lines) >= count:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"no {count} note line(s) in the relay's log: {relay.lines()}")


def notes(relay: Relay, ref: str) -> dict[str, str]:
    """Each commit of `ref` on the remote, with its flowerbox note ("" for none)."""
    out = git(
        "log", "--notes=flowerbox", "--format=%H%x00%N%x01", ref,
        cwd=relay.remote.root / "app.git", env=relay.remote.env,
    )  # fmt: skip
    pairs = (entry.strip("\n").split("\0") for entry in out.split("\1") if entry.strip())
    return {sha: note for sha, note in pairs}  # noqa: C416 - a pair a commit, told


def push(relay: Relay, work: Path, ref: str = BRANCH, token: str = RUN_TOKEN) -> Any:
    return relay.git("push", "origin", f"HEAD:{ref}", cwd=work, token=token)


def test_each_commit_new_in_the_push_gets_the_runs_note(relay: Relay) -> None:
    work = relay.clone()
    made = [commit(relay, work, "one\n"), commit(relay, work, "two\n")]
    done = push(relay, work)
    assert done.returncode == 0, done.stderr
    (line,) = noted(relay)
    assert line | {"note": "written", "run": RUN, "commits": 2} == line
    found = notes(relay, BRANCH)
    seed = git("rev-parse", "main", cwd=relay.remote.root / "app.git", env=relay.remote.env)
    assert found[seed.strip()] == ""  # on main before the run: not the run's
    for sha in made:
        assert found[sha].splitlines() == [
            f"flowerbox-run: {RUN}",
            f"image: {IMAGE}",
            f"flower: {__version__}",
            "claude-code: unknown",
            "model: claude-opus-5-5",
            f"network: {NETWORK}",
            "box: unknown",
            "cost: $0.250000 (4 requests)",
            "exit: unknown",
            f"namespace: {NAMESPACE}",
            f"pushed: {BRANCH} {'0' * 40}..{made[-1]} through the broker's git relay",
            "noted: 2 commits new in this push",
        ]
    author = git("log", "-1", "--format=%an <%ae>", NOTES_REF, cwd=relay.remote.root / "app.git")
    assert author.strip() == "flowerbox <flowerbox@localhost>"


def test_a_second_run_appends_and_a_later_push_notes_only_what_is_new(relay: Relay) -> None:
    work = relay.clone()
    first = commit(relay, work, "one\n")
    assert push(relay, work).returncode == 0
    noted(relay)
    later = commit(relay, work, "two\n")
    assert push(relay, work).returncode == 0  # a fast-forward of the run's own branch
    noted(relay, 2)
    other = relay.clone()
    theirs = commit(relay, other, "theirs\n")
    assert push(relay, other, OTHER_BRANCH, OTHER_TOKEN).returncode == 0
    lines = noted(relay, 3)
    assert [line["commits"] for line in lines] == [1, 1, 1]
    mine = notes(relay, BRANCH)
    assert f"pushed: {BRANCH} {'0' * 40}..{first}" in mine[first]
    assert f"pushed: {BRANCH} {first}..{later}" in mine[later]
    assert mine[first].count("flowerbox-run:") == 1  # not noted again by the later push
    their_note = notes(relay, OTHER_BRANCH)[theirs]
    assert f"flowerbox-run: {OTHER_RUN}\nimage: {OTHER_IMAGE}\n" in their_note
    assert "cost: unknown" in their_note  # the ledger had nothing for that run


def test_the_agents_own_push_of_the_notes_ref_is_refused(relay: Relay) -> None:
    work = relay.clone()
    forged = "flowerbox-run: forged"
    git("notes", "--ref", NOTES_REF, "add", "-m", forged, "HEAD", cwd=work, env=relay.env())
    done = relay.git("push", "origin", f"{NOTES_REF}:{NOTES_REF}", cwd=work)
    assert done.returncode != 0 and "[remote rejected]" in done.stderr
    assert NOTES_REF not in relay.remote.refs("app")
    assert relay.pushes_upstream() == 0


def test_a_refused_push_writes_no_note(relay: Relay) -> None:
    work = relay.clone()
    commit(relay, work)
    assert push(relay, work, "refs/heads/main").returncode != 0
    time.sleep(1)  # time a note would have had
    assert NOTES_REF not in relay.remote.refs("app")
    assert relay.notes() == []


def test_a_push_the_remote_answers_ng_gets_no_note(relay: Relay) -> None:
    relay.remote.pre_receive("app", "echo 'no, says the forge' >&2\nexit 1\n")
    work = relay.clone()
    commit(relay, work)
    done = push(relay, work)
    assert done.returncode != 0 and "pre-receive hook declined" in done.stderr
    assert relay.log()[-1]["decision"] == "allow"  # the relay forwarded it; the remote said ng
    time.sleep(1)
    assert NOTES_REF not in relay.remote.refs("app")
    assert relay.notes() == []


def test_a_note_that_cannot_be_written_is_logged_and_the_push_stands(relay: Relay) -> None:
    refuse_notes = 'while read old new ref; do case "$ref" in refs/notes/*) exit 1;; esac; done\n'
    relay.remote.pre_receive("app", refuse_notes)
    work = relay.clone()
    sha = commit(relay, work)
    done = push(relay, work)
    assert done.returncode == 0, done.stderr  # the client's answer is the push's
    assert f"{sha} commit\t{BRANCH}" in relay.remote.refs("app")
    (line,) = noted(relay)
    assert line["note"] == "failed" and line["run"] == RUN
    assert "refs/notes/flowerbox" in line["reason"] and TOKEN not in line["reason"]
    assert NOTES_REF not in relay.remote.refs("app")


def test_a_note_racing_another_is_retried_on_the_new_notes(relay: Relay, tmp_path: Path) -> None:
    """Between the relay's fetch and its push another writer moves the notes ref (here the
    remote's hook, once): the relay's push is refused, and it notes again on top."""
    marker = tmp_path / "raced"
    bare = relay.remote.root / "app.git"
    relay.remote.pre_receive(
        "app",
        f'while read old new ref; do [ "$ref" = {NOTES_REF} ] || continue\n'
        f'[ -e {marker} ] && exit 0; touch {marker}\n'
        f'head=$(git rev-parse refs/heads/main)\n'
        "unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES\n"
        f'git -c user.name=o -c user.email=o@x notes --ref {NOTES_REF} add -m "by another" $head\n'
        "done\n",
    )  # fmt: skip
    work = relay.clone()
    sha = commit(relay, work)
    assert push(relay, work).returncode == 0
    (line,) = noted(relay)
    assert line["note"] == "written", line
    assert marker.exists()
    main = git("rev-parse", "main", cwd=bare, env=relay.remote.env).strip()
    assert notes(relay, "main")[main] == "by another"
    assert f"flowerbox-run: {RUN}" in notes(relay, BRANCH)[sha]


def test_the_notes_cap_is_said_in_the_note(relay: Relay) -> None:
    relay.relay.note_cap = 2
    work = relay.clone()
    made = [commit(relay, work, f"{n}\n") for n in range(3)]
    assert push(relay, work).returncode == 0
    (line,) = noted(relay)
    assert line["commits"] == 2 and line["capped"] is True
    found = notes(relay, BRANCH)
    assert found[made[0]] == ""
    assert "noted: the newest 2 commits new in this push (2 at most are noted)" in found[made[2]]


def test_the_credential_is_in_no_argv_and_no_log_line(
    relay: Relay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every git the relay starts is this wrapper first: it records its argv (what any
    process on the machine can read in /proc/<pid>/cmdline) and its environment."""
    wrapped = tmp_path / "bin"
    wrapped.mkdir()
    record = tmp_path / "argv.jsonl"
    real = next(
        Path(d) / "git" for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / "git").is_file()
    )
    script = wrapped / "git"
    record_argv = f'printf "%s\\0" "$@" >> {record}; printf "\\n" >> {record}'
    script.write_text(f'#!/bin/sh\n{record_argv}\nexec {real} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapped}{os.pathsep}{os.environ['PATH']}")
    work = relay.clone()
    commit(relay, work)
    assert push(relay, work).returncode == 0
    assert noted(relay)[0]["note"] == "written"
    calls = record.read_text().splitlines()
    assert any("notes" in call.split("\0") for call in calls)  # the wrapper saw the relay's git
    secrets = [TOKEN, BASIC.removeprefix("Basic ")]
    for secret in secrets:
        assert not [call for call in calls if secret in call]
        assert secret not in relay.log_path.read_text()
