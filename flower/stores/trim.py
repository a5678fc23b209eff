"""Layer 2 of the session store: expire stale glances, spill old bulky tool results.

Two orthogonal rules, both applied only to the copy ``load()`` hands back (seeds, "Les
trois couches du session store"):

* :func:`expire` (:class:`EphemeralPolicy`) is about *staleness*: the short result of a
  ``git status`` or ``ls`` from many turns ago is not useless, it is misleading. Old results
  of Bash calls whose command :func:`is_ephemeral` are replaced by a one-line notice and
  dropped, not spilled: re-running the command is the way to get them back.
* :func:`trim` (:class:`TrimPolicy`) is about *volume*: old results of any tool that are
  at least ``min_chars`` long are written to ``<workspace>/<spill_dirname>/<sha256[:16]>.txt``
  and replaced by a one-line pointer the model can follow with Read.

Decisions the seeds leave open:

* A "turn" is one API response of the model (one ``message.id``; the CLI writes one entry
  per content block of it). A result's *age* is the number of responses after it, so a
  result the model has not answered yet is 0 turns old; ``keep_recent=N`` keeps every
  result with age <= N. Counting user prompts instead would never trim inside a long step,
  which is one prompt followed by hundreds of tool calls.
* ``EphemeralPolicy.max_chars`` bounds what counts as a glance: only results of at most
  ``max_chars`` characters expire. A longer one (a big ``git log``) is left to :func:`trim`,
  which keeps it recoverable from the spill file; the default equals
  ``TrimPolicy.min_chars`` so the two rules meet without a gap.
* Error results are not expired (a failed glance is short and says why it failed), and
  refused calls are left alone by both rules: whether to keep them is the prune layer's
  decision, and it recognises them by their text.

Red lines: a tool_result block is never removed (only its ``content`` is replaced);
isCompactSummary / isMeta entries are never changed; image and document content is never
touched. The input list is never mutated: changed entries are copies, unchanged ones are
shared with the input.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower.stores.ephemeral import is_ephemeral
from flower.stores.sqlite import SqliteSessionStore
from flower.stores.transcript import (
    Entry,
    blocks,
    is_denial,
    is_protected,
    replace_blocks,
    result_text,
    tool_uses,
    turn_ages,
)

__all__ = [
    "SPILL_POINTER",
    "EphemeralPolicy",
    "TrimPolicy",
    "TrimmingSessionStore",
    "expire",
    "is_ephemeral",
    "trim",
]

#: What a spilled result becomes (seeds: trim.py:54-57).
SPILL_POINTER = "[工具结果已归档:{chars} 字符。完整内容在 {path},需要时用 Read 读取]"

Report = MutableMapping[str, int]
Replace = Callable[[Entry, dict[str, Any], int], str | None]


def _at_least(owner: object, name: str, floor: int) -> None:
    value = getattr(owner, name)
    if value < floor:
        raise ValueError(f"{type(owner).__name__}.{name} must be >= {floor}, got {value}")


@dataclass
class TrimPolicy:
    """Spill tool results older than ``keep_recent`` turns that are ``min_chars`` or longer."""

    keep_recent: int = 20
    min_chars: int = 2000
    spill_dirname: str = ".flower/spill"
    """Relative to the workspace, so the agent's Read can reach it. Not the workbench's
    spill/ of spill_guard: the two directories differ on purpose (seeds, TrimPolicy)."""
    enabled: bool = True

    def __post_init__(self) -> None:
        _at_least(self, "keep_recent", 0)
        _at_least(self, "min_chars", 1)


@dataclass
class EphemeralPolicy:
    """Expire results of ephemeral Bash commands older than ``keep_recent`` turns.

    ``text`` is formatted with ``cmd`` (the command) and ``age`` (turns since the result).
    """

    enabled: bool = True
    keep_recent: int = 6
    max_chars: int = 2000
    text: str = "[{cmd} 的结果已过期(第 {age} 轮前),当前状态可能已变。需要请重新执行]"

    def __post_init__(self) -> None:
        _at_least(self, "keep_recent", 0)
        _at_least(self, "max_chars", 1)


def _replace_old_results(
    entries: Sequence[Entry], *, keep_recent: int, replace: Replace
) -> tuple[list[Entry], int]:
    """Offer every tool_result older than ``keep_recent`` turns to ``replace``, which returns
    new content or None to keep it. Returns the new list and how many were replaced."""
    shaped: list[Entry] = []
    replaced = 0
    for entry, age in zip(entries, turn_ages(entries), strict=True):
        if entry.get("type") == "user" and age > keep_recent and not is_protected(entry):
            changes = {
                i: {**block, "content": content}
                for i, block in enumerate(blocks(entry))
                if block.get("type") == "tool_result"
                and (content := replace(entry, block, age)) is not None
            }
            if changes:
                entry = replace_blocks(entry, changes)
                replaced += len(changes)
        shaped.append(entry)
    return shaped, replaced


def _tool_names(entries: Sequence[Entry]) -> dict[str, str]:
    return {tid: str(block.get("name", "")) for tid, block in tool_uses(entries).items()}


def expire(
    entries: Sequence[Entry], policy: EphemeralPolicy, *, report: Report | None = None
) -> list[Entry]:
    """Replace old results of ephemeral Bash commands (see the module docstring)."""
    commands = {
        tid: block["input"]["command"]
        for tid, block in tool_uses(entries).items()
        if block.get("name") == "Bash"
        and isinstance(block.get("input"), dict)
        and isinstance(block["input"].get("command"), str)
    }

    def replace(entry: Entry, block: dict[str, Any], age: int) -> str | None:
        cmd = commands.get(block.get("tool_use_id", ""))
        if cmd is None or block.get("is_error") is True:
            return None
        text = result_text(block)
        if text is None or len(text) > policy.max_chars or not is_ephemeral(cmd):
            return None
        return policy.text.format(cmd=cmd, age=age)

    shaped, count = _replace_old_results(entries, keep_recent=policy.keep_recent, replace=replace)
    if report is not None:
        report["expired"] = report.get("expired", 0) + count
    return shaped


def _spill(directory: Path, text: str) -> Path:
    """Write ``text`` to its content-addressed file (once) and return the path.

    The file is written to a temporary name and renamed, so a reader never sees half of
    it. No fsync: if a crash loses it, the next load() writes it again.
    """
    data = text.encode("utf-8", errors="replace")
    path = directory / f"{hashlib.sha256(data).hexdigest()[:16]}.txt"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".spill-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return path


def trim(
    entries: Sequence[Entry],
    policy: TrimPolicy,
    workspace: str | Path,
    *,
    report: Report | None = None,
) -> list[Entry]:
    """Spill old plain-text results of ``min_chars`` or more and point to the file instead.

    A result whose file cannot be written (read-only workspace, full disk) is kept whole
    and counted as ``spill_errors``: a pointer to a missing file would lose it.
    """
    directory = Path(workspace).absolute() / policy.spill_dirname
    names = _tool_names(entries)
    errors = 0

    def replace(entry: Entry, block: dict[str, Any], age: int) -> str | None:
        nonlocal errors
        text = result_text(block)
        if text is None or len(text) < policy.min_chars:
            return None
        if is_denial(entry, block, names.get(block.get("tool_use_id", ""), "")):
            return None
        try:
            path = _spill(directory, text)
        except OSError:
            errors += 1
            return None
        return SPILL_POINTER.format(chars=len(text), path=path)

    shaped, count = _replace_old_results(entries, keep_recent=policy.keep_recent, replace=replace)
    if report is not None:
        report["spilled"] = report.get("spilled", 0) + count
        report["spill_errors"] = report.get("spill_errors", 0) + errors
    return shaped


class TrimmingSessionStore(SqliteSessionStore):
    """A :class:`SqliteSessionStore` whose ``load()`` expires, then trims (seeds' order).

    Attributes: ``workspace`` (absolute), ``policy``, ``ephemeral`` and ``last_report``
    (``{"expired": n, "spilled": n, "spill_errors": n}`` for the latest load; a step whose
    policy has ``enabled=False`` is skipped entirely and reports nothing).
    """

    def __init__(
        self,
        path: str | Path,
        workspace: str | Path,
        *,
        policy: TrimPolicy | None = None,
        ephemeral: EphemeralPolicy | None = None,
    ) -> None:
        super().__init__(path)
        self.workspace = Path(workspace).resolve()
        self.policy = policy if policy is not None else TrimPolicy()
        self.ephemeral = ephemeral if ephemeral is not None else EphemeralPolicy()

    def reshape(self, entries: list[Entry], report: dict[str, int]) -> list[Entry]:
        entries = super().reshape(entries, report)
        if self.ephemeral.enabled:
            entries = expire(entries, self.ephemeral, report=report)
        if self.policy.enabled:
            entries = trim(entries, self.policy, self.workspace, report=report)
        return entries
