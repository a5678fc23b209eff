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
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from flower.stores.ephemeral import is_ephemeral
from flower.stores.sqlite import SqliteSessionStore
from flower.stores.survey import Survey
from flower.stores.transcript import Entry, is_denial, replace_blocks, result_text

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
    pointer: str = SPILL_POINTER
    """What replaces a spilled result, formatted with ``chars`` and ``path`` (Runtime passes
    the current language's)."""

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


class _Rule(Protocol):
    """One rewrite of old tool results (expire's, trim's): offered every tool_result older
    than ``keep_recent`` turns (the block and the index of its entry), it returns new
    content or None to keep the result."""

    keep_recent: int

    def __call__(self, entry: Entry, block: dict[str, Any], index: int) -> str | None: ...

    def count(self, report: Report | None, replaced: int) -> None:
        """Add what this rule did to ``report``."""


def _rewrite_old_results(
    entries: Sequence[Entry], survey: Survey, rules: Sequence[_Rule], report: Report | None
) -> list[Entry]:
    """Apply ``rules`` in order to the old results of ``entries`` (of which ``survey`` is the
    survey), in one walk over the results the survey lists.

    A rule gets the block as the rules before it left it, and the entry as loaded: the
    rules look at the entry only for what they never change (its other blocks' kinds and
    its toolDenialKind), so this equals applying each rule to the whole list in turn.
    Entries without a rewritten result are shared with ``entries``.
    """
    if not rules:
        return list(entries)
    # Entry i is older than rule n's keep_recent exactly when i < bounds[n].
    bounds = [survey.older_than(rule.keep_recent) for rule in rules]
    end = max(bounds)
    offered = list(zip(range(len(rules)), rules, bounds, strict=True))
    counts = [0] * len(rules)
    changes: dict[int, dict[int, dict[str, Any]]] = {}
    for i, j in survey.results:
        if i >= end:
            break  # results come in order and ages never grow: every later one is younger
        entry = entries[i]
        block = loaded = entry["message"]["content"][j]  # the survey found it there
        for n, rule, bound in offered:
            if i < bound and (content := rule(entry, block, i)) is not None:
                block = {**block, "content": content}
                counts[n] += 1
        if block is not loaded:
            changes.setdefault(i, {})[j] = block
    shaped = list(entries)
    for i, rewritten in changes.items():
        shaped[i] = replace_blocks(entries[i], rewritten)
    for rule, count in zip(rules, counts, strict=True):
        rule.count(report, count)
    return shaped


def _bash_command(use: dict[str, Any] | None) -> str | None:
    """The command of a Bash tool_use block, or None for any other block (or none)."""
    if use is None or use.get("name") != "Bash":
        return None
    tool_input = use.get("input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    return command if isinstance(command, str) else None


class _Expiry:
    """expire's rule: a glance-sized result of an ephemeral Bash command becomes a notice."""

    def __init__(self, policy: EphemeralPolicy, survey: Survey) -> None:
        self.keep_recent = policy.keep_recent
        self._policy = policy
        self._survey = survey
        self._tool_uses = survey.tool_uses

    def __call__(self, entry: Entry, block: dict[str, Any], index: int) -> str | None:
        if block.get("is_error") is True:
            return None
        cmd = _bash_command(self._tool_uses.get(block.get("tool_use_id", "")))
        if cmd is None:
            return None
        text = result_text(block)
        if text is None or len(text) > self._policy.max_chars or not is_ephemeral(cmd):
            return None
        return self._policy.text.format(cmd=cmd, age=self._survey.age(index))

    def count(self, report: Report | None, replaced: int) -> None:
        if report is not None:
            report["expired"] = report.get("expired", 0) + replaced


def expire(
    entries: Sequence[Entry],
    policy: EphemeralPolicy,
    *,
    report: Report | None = None,
    survey: Survey | None = None,
) -> list[Entry]:
    """Replace old results of ephemeral Bash commands (see the module docstring).

    ``survey`` saves a walk over ``entries`` when the caller has their :class:`Survey`.
    """
    survey = survey if survey is not None else Survey(entries)
    return _rewrite_old_results(entries, survey, [_Expiry(policy, survey)], report)


def _spill(directory: str, text: str) -> str:
    """Write ``text`` to its content-addressed file (once) and return the path.

    The file is written to a temporary name and renamed, so a reader never sees half of
    it. No fsync: if a crash loses it, the next load() writes it again. Paths are plain
    strings: this runs for every big old result on every load.
    """
    data = text.encode("utf-8", errors="replace")
    path = os.path.join(directory, f"{hashlib.sha256(data).hexdigest()[:16]}.txt")
    if not os.path.exists(path):
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".spill-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return path


class _Spilling:
    """trim's rule: a big plain-text result goes to a spill file, a pointer takes its place.

    A result whose file cannot be written (read-only workspace, full disk) is kept whole
    and counted as ``spill_errors``: a pointer to a missing file would lose it.
    """

    def __init__(self, policy: TrimPolicy, workspace: str | Path, survey: Survey) -> None:
        self.keep_recent = policy.keep_recent
        self._min_chars = policy.min_chars
        self._directory = str(Path(workspace).absolute() / policy.spill_dirname)
        self._pointer = policy.pointer
        self._tool_uses = survey.tool_uses
        self._errors = 0

    def __call__(self, entry: Entry, block: dict[str, Any], index: int) -> str | None:
        text = result_text(block)
        if text is None or len(text) < self._min_chars:
            return None
        use = self._tool_uses.get(block.get("tool_use_id", ""))
        if is_denial(entry, block, "" if use is None else str(use.get("name", ""))):
            return None
        try:
            path = _spill(self._directory, text)
        except OSError:
            self._errors += 1
            return None
        return self._pointer.format(chars=len(text), path=path)

    def count(self, report: Report | None, replaced: int) -> None:
        if report is not None:
            report["spilled"] = report.get("spilled", 0) + replaced
            report["spill_errors"] = report.get("spill_errors", 0) + self._errors


def trim(
    entries: Sequence[Entry],
    policy: TrimPolicy,
    workspace: str | Path,
    *,
    report: Report | None = None,
    survey: Survey | None = None,
) -> list[Entry]:
    """Spill old plain-text results of ``min_chars`` or more and point to the file instead
    (see :class:`_Spilling`). ``survey`` as for :func:`expire`."""
    survey = survey if survey is not None else Survey(entries)
    return _rewrite_old_results(entries, survey, [_Spilling(policy, workspace, survey)], report)


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
        policy: TrimPolicy | None = None,
        ephemeral: EphemeralPolicy | None = None,
    ) -> None:
        super().__init__(path)
        self.workspace = Path(workspace).resolve()
        self.policy = policy if policy is not None else TrimPolicy()
        self.ephemeral = ephemeral if ephemeral is not None else EphemeralPolicy()

    def reshape(
        self, entries: list[Entry], report: dict[str, int], *, survey: Survey | None = None
    ) -> list[Entry]:
        survey = survey if survey is not None else Survey(entries)
        entries = super().reshape(entries, report, survey=survey)
        rules: list[_Rule] = []
        if self.ephemeral.enabled:
            rules.append(_Expiry(self.ephemeral, survey))
        if self.policy.enabled:
            rules.append(_Spilling(self.policy, self.workspace, survey))
        # One walk applies both, expire first (the seeds' order).
        return _rewrite_old_results(entries, survey, rules, report)
