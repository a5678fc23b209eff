"""The provenance note on a cluster run's branch, written by the broker's git relay once the
remote has reported the run's push of its one ref (`refs/flowerbox/<run-id>`) updated
(flowerbox.broker.gitrelay calls this; the agent cannot, as it never holds the credential).

    noted = write_notes(Upstream(url, authorization), command, provenance)
    noted.commits, noted.capped

In a private temporary bare repository (never the agent's files) it fetches all the
remote's refs, commits only (`--filter=tree:0`: a note is on a commit, so no tree or blob of
the repository is brought), lists the commits new in the push (reachable from its new tip
and from neither its old one nor any other ref; the newest `cap` of them, and the note
says when it was cut), fetches the remote's `refs/notes/flowerbox` whole (if there is one),
appends the note (flowerbox.note's lines, and the push's) to each commit as `flowerbox`, and
pushes the notes ref as a fast-forward. When another writer moved it in between, the push is
refused: the notes are fetched again and written on top, `tries` times at most.

git is the system's, run through flowerbox.hostgit (no hooks, no credential helper, bounded
memory and time, only the remote's own protocol) and configured by nothing of the machine's:
GIT_CONFIG_NOSYSTEM, no global config, a private HOME, no redirects followed. The credential
goes in the environment (GIT_CONFIG_COUNT/KEY/VALUE, as `http.<url>.extraHeader`, sent to that
repository's URL only), never in argv or a URL, which any process on the machine can read in
/proc.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from flower import text
from flowerbox.broker.pktline import Command
from flowerbox.errors import HostGitError, ProvenanceError
from flowerbox.hostgit import HostGit, empty_hooks
from flowerbox.note import IDENTITY, NOTES_REF, Provenance

__all__ = ["CAP", "TRIES", "Noted", "Upstream", "write_notes"]

CAP = 256  # commits noted a push: one git process each
TRIES = 3  # pushes of the notes ref, when another writer keeps moving it
TIMEOUT = 120.0  # one git command


@dataclass(frozen=True)
class Upstream:
    """The run's repository at the remote, as the relay reaches it, and the Authorization
    header's value the remote takes."""

    url: str
    authorization: str = field(repr=False)


@dataclass(frozen=True)
class Noted:
    """The commits that got the note, oldest first; `capped`: the push had more."""

    commits: tuple[str, ...]
    capped: bool


def write_notes(
    upstream: Upstream,
    command: Command,
    provenance: Provenance,
    *,
    cap: int = CAP,
    tries: int = TRIES,
) -> Noted:
    """Note each commit new in `command` (an update the remote reported done) at `upstream`.

    Raises:
        ProvenanceError: a git command failed (its words, never the credential), or the
            notes ref's push failed `tries` times (another writer kept moving it).
    """
    try:
        with tempfile.TemporaryDirectory(prefix="flowerbox-notes-") as scratch:
            return _write(_Git(upstream, Path(scratch)), command, provenance, cap, tries)
    except OSError as exc:  # the scratch folder: no room, no /tmp
        raise ProvenanceError(text("broker.notes_no_scratch", problem=exc)) from exc


def _write(git: _Git, command: Command, provenance: Provenance, cap: int, tries: int) -> Noted:
    url = git.upstream.url
    git("clone", "--mirror", "--quiet", "--filter=tree:0", url, ".")
    commits = git.new_commits(command, cap + 1)
    noted = Noted(tuple(reversed(commits[:cap])), capped=len(commits) > cap)
    if not noted.commits:
        return noted
    lines = _push_lines(command, noted, cap)
    note = dataclasses.replace(provenance, more=(*provenance.more, *lines)).text()
    refused = ""
    for _ in range(tries):
        refused = git.note(noted.commits, note)
        if not refused:
            return noted
    raise ProvenanceError(
        text("broker.notes_push_failed", ref=NOTES_REF, url=url, tries=tries, refused=refused)
    )


def _push_lines(command: Command, noted: Noted, cap: int) -> list[tuple[str, str]]:
    pushed = f"{command.ref} {command.old}..{command.new} through the broker's git relay"
    count = len(noted.commits)
    if noted.capped:
        said = f"the newest {count} commits new in this push ({cap} at most are noted)"
    else:
        said = f"{count} commit{'' if count == 1 else 's'} new in this push"
    return [("pushed", pushed), ("noted", said)]


class _Git:
    """The system's git in `scratch`/repo, HOME in `scratch`/home, the credential in its
    environment for `upstream` only."""

    def __init__(self, upstream: Upstream, scratch: Path) -> None:
        self.upstream = upstream
        self.repo = scratch / "repo"
        home = scratch / "home"
        self.repo.mkdir()
        home.mkdir()
        settings = {
            f"http.{upstream.url}.extraHeader": f"Authorization: {upstream.authorization}",
            "http.followRedirects": "false",
        }
        env = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
            "GIT_CONFIG_COUNT": str(len(settings)),
        }
        for n, (key, value) in enumerate(settings.items()):
            env |= {f"GIT_CONFIG_KEY_{n}": key, f"GIT_CONFIG_VALUE_{n}": value}
        scheme = urlsplit(upstream.url).scheme
        self.git = HostGit(
            hooks=empty_hooks(scratch), protocols=(scheme,), timeout=TIMEOUT, env=env
        )

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        done = self.run(*args, stdin=stdin)
        if done.returncode != 0:
            raise ProvenanceError(_failed(args, done.stderr.strip()))
        return done.stdout

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return self.git.run(*args, repo=self.repo, stdin=stdin)
        except HostGitError as exc:
            raise ProvenanceError(_failed(args, exc)) from exc

    def new_commits(self, command: Command, most: int) -> list[str]:
        """The commits of the push, newest first, `most` at most: reachable from its new
        tip, not from its old one (when the clone has it: a forced push left it behind),
        nor from any other ref of the remote (a tag's or a pull request's commits are not
        the run's, though it may point its branch at them)."""
        args = [f"--max-count={most}", command.new, "--not", f"--exclude={command.ref}", "--all"]
        old = command.old.strip("0") and command.old
        if old and self.run("cat-file", "-e", f"{old}^{{commit}}").returncode == 0:
            args.append(old)
        return self("rev-list", *args).split()

    def note(self, commits: tuple[str, ...], text: str) -> str:
        """Append `text` to each commit's note on the remote's notes as they are now, and
        push: "" when the push went through, else git's words (the remote's notes moved
        meanwhile, or it refused: tried again from the start)."""
        tip = self("ls-remote", self.upstream.url, NOTES_REF).split()
        if tip:
            self("fetch", "--quiet", "--no-tags", self.upstream.url, f"+{NOTES_REF}:{NOTES_REF}")
        else:
            self("update-ref", "-d", NOTES_REF)
        for sha in commits:
            self(*IDENTITY, "notes", "--ref", NOTES_REF, "append", "-F", "-", sha, stdin=text)
        pushed = self.run("push", "--quiet", self.upstream.url, f"{NOTES_REF}:{NOTES_REF}")
        return "" if pushed.returncode == 0 else pushed.stderr.strip() or "git push failed"


def _failed(args: tuple[str, ...], problem: object) -> str:
    """git's refusal of `args` (its first two words name the command), for a person."""
    return text("broker.git_failed", command=" ".join(args[:2]), problem=problem)
