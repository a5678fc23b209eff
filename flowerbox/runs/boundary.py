"""The host's side of the trust boundary around one run (DESIGN.md, "The trust boundary").

    spec = before_run(spec, image_id=...)   # the box's shadow gitdir; what the host records
    ... the box runs: everything it can write is hostile from here on ...
    lines = after_run(spec, code)           # what the user is told at the end

Before: the repository's tips for provenance, a start copy of every file a later `flower` on
the host would load (`.env`, `.flowerbox/`, the protected paths) or the user's own git would
read or run (config files it includes from the working tree, a hooks folder there), and the
shadow gitdir the
box gets instead of the user's `.git` (flowerbox.box.gitshadow) — all in the run's host-only
folder (flowerbox.box.state).

After, in this order, so that no git call ever meets what the box planted: record the end
(status, exit code, cost from the gateway's host-only ledger), rename aside any git metadata
the box made in the workspace, bring the box's branches back into the user's repository (as
data: no hook or config of the box's runs), note the new commits (provenance), and report
each watched file the box created, changed or removed, with its diff. The lines are printed
by the attached CLI and kept in the run's meta for `flowerbox logs`/`attach` of a detached
run.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import shutil
import stat
import sys
from datetime import datetime
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from flower import printable, text
from flowerbox.box import gitshadow, state
from flowerbox.box.spec import BoxSpec
from flowerbox.box.untrusted import open_dir, read_bytes
from flowerbox.errors import RunError, UntrustedFileError
from flowerbox.runs import provenance, records
from flowerbox.runs.trace import send_box_trace
from flowerbox.wire import OBJECTS_IN_BOX

SHADOW = "shadow.json"
WATCHED = "watched.json"
WATCHED_ROOTS = (".env", ".flowerbox")
MAX_WATCHED_FILES = 200
MAX_WATCHED_BYTES = 64 * 1024
MAX_DIFF_LINES = 40


def before_run(spec: BoxSpec, *, image_id: str) -> BoxSpec:
    """Record what the host needs to judge the run afterwards, and give the box its own
    gitdir; the spec the box is started from.

    Raises:
        GitShadowError: the workspace's git cannot be shadowed (the message says
            what to do).
    """
    provenance.snapshot(spec, image_id=image_id)
    _write(spec.state_dir / WATCHED, watched(spec))
    if spec.git != "dir":
        return spec
    shadow = gitshadow.make(
        spec.workspace, records.box_area(spec) / "git", objects_in_box=OBJECTS_IN_BOX
    )
    _write(spec.state_dir / SHADOW, records.to_json(shadow))
    return dataclasses.replace(
        spec,
        shadow_git=shadow.gitdir,
        git_objects=shadow.objects,
        git_alternates=shadow.alternates,
    )


def after_run(spec: BoxSpec, code: int | None) -> list[str]:
    """Everything that follows a run once its containers are gone, attached or detached;
    the lines that tell the user what came back and what the box changed. Never raises:
    a run's result must not depend on its aftermath (each failure becomes a line)."""
    records.record_end(spec, code)
    ended = records.load(spec.state_dir)
    lines: list[str] = (
        [ended.meta["stop_reason"]] if ended and ended.meta.get("stop_reason") else []
    )
    kept = False
    for step in (_quarantine, _bring_back, _notes, _watched_report, _trace):
        try:
            lines += step(spec, code)
        except Exception as exc:  # noqa: BLE001 - reported, and the next step still runs
            lines.append(f"flowerbox: {step.__name__.strip('_')} failed: {exc}")
            kept = kept or step is _bring_back
    if kept:  # the box's commits are only in its git directory: kept for another try
        lines.append(_keep(spec))
    shutil.rmtree(records.box_area(spec), ignore_errors=True)  # never follows a link
    records.record(spec, notices=lines)
    return lines


def _keep(spec: BoxSpec) -> str:
    """The run's box area moved, whole, where only the host reaches it (the run's cleanup
    removes the box area), and the line that says how to try again."""
    try:
        os.rename(records.box_area(spec), state.kept_folder(spec.run_id))
    except OSError as exc:
        return f"flowerbox: the run's commits did not come back and cannot be kept: {exc}"
    return (
        f"flowerbox: the run's commits did not come back; its git directory is kept: "
        f"`flowerbox deliver {spec.run_id}` tries again"
    )


def deliver_again(spec: BoxSpec) -> list[str]:
    """Bring back the commits of an ended run that did not come back when it ended (its git
    directory kept by `_keep`); the directory goes once they did. Raises RunError when there
    is nothing to bring back, or when it fails again (the directory then stays)."""
    kept = state.kept_folder(spec.run_id)
    if not (spec.state_dir / SHADOW).is_file() or not kept.is_dir():
        raise RunError(text("runs.nothing_to_bring_back", run=spec.run_id))
    try:
        lines = _bring_back(spec, None, kept=kept)
    except Exception as exc:  # noqa: BLE001 - whatever it was, the directory stays for a retry
        raise RunError(text("runs.bring_back_failed", run=spec.run_id, problem=exc)) from exc
    shutil.rmtree(kept, ignore_errors=True)
    return lines or [f"run {spec.run_id} made no new commits"]


def _quarantine(spec: BoxSpec, code: int | None) -> list[str]:
    started = records.load(spec.state_dir)
    since = _timestamp(started.meta.get("started") if started else None)
    done = gitshadow.quarantine(
        spec.workspace, since=since, run_id=spec.run_id, start_layout=spec.git
    )
    return done.lines()


def _bring_back(spec: BoxSpec, code: int | None, *, kept: Path | None = None) -> list[str]:
    """`kept`: the box area as `_keep` moved it (the shadow's gitdir is in it)."""
    path = spec.state_dir / SHADOW
    if spec.git != "dir" or not path.is_file():
        return []
    shadow = records.from_json(gitshadow.Shadow, json.loads(path.read_text(encoding="utf-8")))
    if kept is not None:
        inside = shadow.gitdir.relative_to(records.box_area(spec))
        shadow = dataclasses.replace(shadow, gitdir=kept / inside)
    before = frozenset(_delivered(records.chain(spec.run_id)))
    brought = gitshadow.bring_back(shadow, run_id=spec.run_id, delivered_before=before)
    if brought.delivered:
        mine = set(_delivered([spec.run_id])) | set(brought.delivered)
        records.record(spec, delivered=sorted(mine))
    return brought.lines() if brought.branches or brought.skipped else []  # quiet when idle


def _delivered(run_ids: list[str]) -> list[str]:
    """The delivery branches these runs brought back under their own names, as flowerbox's
    own records say (only the run that made such a branch, or one resuming it, may move it)."""
    found: list[str] = []
    for run_id in run_ids:
        run = records.load(state.run_folder(run_id))
        names = run.meta.get("delivered") if run is not None else None
        found += [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    return found


def _notes(spec: BoxSpec, code: int | None) -> list[str]:
    commits = provenance.attach_notes(spec, code)
    if not commits:
        return []
    return [
        f"noted {len(commits)} commit(s) of {spec.run_id} in {provenance.NOTES_REF} "
        "(git log --notes=flowerbox)"
    ]


def _trace(spec: BoxSpec, code: int | None) -> list[str]:
    """The run's trace, when the OTEL variables ask for one (flowerbox.runs.trace)."""
    return send_box_trace(spec)


def _watched_report(spec: BoxSpec, code: int | None) -> list[str]:
    path = spec.state_dir / WATCHED
    before = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return changes(before, watched(spec))


# --- the watched files --------------------------------------------------------------------


def watched(spec: BoxSpec) -> dict[str, str | None]:
    """Each watched file's text (None: not text, too big, or not a regular file), read as
    box-written data: `.env`, everything under `.flowerbox/`, the protected paths, and what
    the user's own git reads or runs from the working tree."""
    found: dict[str, str | None] = {}
    names = [*WATCHED_ROOTS, *(p for p in spec.protected if not p.startswith(".git/"))]
    names += [p.relative_to(spec.workspace.resolve()).as_posix() for p in _git_reads(spec)]
    for name in names:
        for relative in _files(spec.workspace, PurePosixPath(name)):
            if len(found) >= MAX_WATCHED_FILES:
                return found
            found[str(relative)] = _text(spec.workspace, relative)
    return found


def _git_reads(spec: BoxSpec) -> list[Path]:
    """What the user's own git reads or runs from the working tree (included config files,
    a hooks folder there: flowerbox.hostgit), so a change the run made there is reported."""
    if spec.git == "none":
        return []
    return state.host_git().in_tree(spec.workspace)


def _files(root: Path, relative: PurePosixPath, depth: int = 0) -> list[PurePosixPath]:
    """`relative` if it is a file, the files below it if it is a folder (no link followed)."""
    *folders, name = relative.parts
    try:
        with open_dir(root, PurePosixPath(*folders) if folders else "") as parent:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except (OSError, ValueError):
        return []
    if not stat.S_ISDIR(mode) or depth > 4:
        return [relative]
    try:
        with open_dir(root, relative) as folder:
            children = sorted(os.listdir(folder))
    except (OSError, ValueError):
        return [relative]
    return [f for child in children for f in _files(root, relative / child, depth + 1)]


def _text(root: Path, relative: PurePosixPath) -> str | None:
    try:
        data = read_bytes(root, relative, limit=MAX_WATCHED_BYTES)
    except (UntrustedFileError, OSError):
        return None
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def changes(before: dict[str, str | None], after: dict[str, str | None]) -> list[str]:
    """One paragraph per watched file the run created, changed or removed, with its diff."""
    lines: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, _ABSENT), after.get(name, _ABSENT)
        if old == new:
            continue
        how = "created" if name not in before else "removed" if name not in after else "changed"
        shown_name = printable(name, one_line=True)  # the box chose it
        lines.append(
            f"the run {how} {shown_name}: a later `flower`, flowerbox or your own git here would "
            "read or run it; check it before you keep it"
        )
        diff = difflib.unified_diff(
            _lines(old), _lines(new), f"{shown_name} (before)", f"{shown_name} (after)", lineterm=""
        )
        shown = [f"  {printable(line, one_line=True)}" for line in diff]
        lines += shown[:MAX_DIFF_LINES]
        if len(shown) > MAX_DIFF_LINES:
            lines.append(f"  ... {len(shown) - MAX_DIFF_LINES} more diff lines")
    return lines


_ABSENT = "\x00absent"


def _lines(text: str | None) -> list[str]:
    if text is None:
        return ["<not a text file, a link, or larger than 64 KiB>"]
    return [] if text == _ABSENT else text.splitlines()


def _timestamp(started: Any) -> float:
    try:
        return datetime.fromisoformat(str(started)).timestamp()
    except ValueError:
        return 0.0  # unknown start: every git entry counts as the run's


def _write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def report(lines: list[str]) -> None:
    """The lines on stderr, as the attached CLI and the supervisor show them: each one line,
    whatever box-chosen name it holds."""
    for line in map(partial(printable, one_line=True), lines):
        print(
            line if line.startswith(("flowerbox:", " ")) else f"flowerbox: {line}", file=sys.stderr
        )
