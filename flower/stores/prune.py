"""Layer 3 of the session store: drop what is an error, not history; heal broken pairs.

On ``load()``, after the trim layer (seeds, "PruningSessionStore + PrunePolicy"):

* :func:`prune` removes the residue of failed API calls (assistant entries with
  ``isApiErrorMessage: true`` and model ``<synthetic>``, and ``system`` entries of subtype
  ``api_error``): resumed, the synthetic "API Error: ..." would be the model's last words.
  It also removes every refused tool call but the newest ``keep_denials``: the tool_use
  block and the tool_result block that carries the refusal, always together. A refusal is
  recognised as the CLI writes it (:func:`flower.stores.transcript.is_denial`): the
  entry's ``toolDenialKind`` (permission-rule, user-rejected, automode-blocked), else an
  is_error result that starts with ``PreToolUse:<Tool> hook error:`` (a hook's deny, e.g.
  flower's guards) or ``Permission to use ...`` / ``Permission for this ...`` (permission
  rules). A call that was interrupted or cancelled is not a refusal: it may have run.
* :func:`relink` drops entries and points their children at the nearest kept ancestor, so
  the ``parentUuid`` chain the CLI walks back from the leaf stays whole.
* :func:`heal_orphans` answers tool_use blocks that have no tool_result anywhere (a kill
  between a call and its result), which the API would reject on every later resume: one
  user entry with an is_error result for each orphan of an API response is inserted right
  after that response's last entry, and the children of that entry now hang below it.
  Nothing is deleted to heal. Its uuid is derived from the anchor's, so every load
  produces the same entry and entries appended after a resume stay chained to it.
  (A PreToolUse ``defer`` also leaves an unanswered call at the leaf; flower does not use
  defer, and healing would stop a deferred call from running on resume.)

Red lines: a tool_result whose tool_use stays is never removed; isCompactSummary / isMeta
entries are never removed and their content never changes (relink may rewrite their
``parentUuid``: a broken chain would lose every entry before it); a removed entry's
children are relinked to its parent. The input list is never mutated.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower.stores.survey import Position, Survey
from flower.stores.transcript import (
    LINK_FIELDS,
    Entry,
    blocks,
    drop_blocks,
    is_denial,
    is_protected,
)
from flower.stores.trim import EphemeralPolicy, TrimmingSessionStore, TrimPolicy

__all__ = [
    "PrunePolicy",
    "PruningSessionStore",
    "answer_entry",
    "heal_orphans",
    "is_healing",
    "prune",
    "relink",
]

Report = MutableMapping[str, int]

#: Namespace of the uuids of healing entries (uuid5 of the anchor's uuid).
_HEAL_NAMESPACE = uuid.UUID("5b0f6f2e-2d55-4f55-9f0e-3c1c6a1b7d10")
#: Namespace of the uuids of late answers (answer_entry), apart from the healings'.
_ANSWER_NAMESPACE = uuid.UUID("0d7c2b8e-5a41-4c8e-9a77-2f3e9b6c1e42")
#: Fields a healing entry copies from the entry it answers, so it reads like the CLI's own.
_SESSION_FIELDS = (
    "isSidechain",
    "agentId",
    "userType",
    "cwd",
    "sessionId",
    "version",
    "gitBranch",
    "timestamp",
)


def _bump(report: Report | None, key: str, count: int) -> None:
    if report is not None:
        report[key] = report.get(key, 0) + count


@dataclass
class PrunePolicy:
    """What the prune layer removes and repairs.

    ``keep_denials`` refused calls survive, the newest ones (default 1: the latest refusal
    stops the model from retrying the same blocked command; older ones only mislead it).
    """

    keep_denials: int = 1
    heal_orphans: bool = True
    orphan_text: str = "[工具调用在返回结果前被中断,没有结果。需要请重新执行]"
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.keep_denials < 0:
            raise ValueError(f"PrunePolicy.keep_denials must be >= 0, got {self.keep_denials}")


def relink(
    entries: Sequence[Entry], removed_uuids: Collection[str], *, report: Report | None = None
) -> list[Entry]:
    """``entries`` without those whose uuid is in ``removed_uuids``, children relinked.

    ``entries`` must still hold the removed entries: their own parents are how a child
    finds its nearest kept ancestor (possibly several removed entries up, or None).
    """
    removed = [i for i, e in enumerate(entries) if e.get("uuid") in removed_uuids]
    parents = {entries[i]["uuid"]: entries[i].get("parentUuid") for i in removed}

    def kept(link: Any) -> Any:
        seen: set[str] = set()
        while link in parents and link not in seen:
            seen.add(link)
            link = parents[link]
        return link

    shaped: list[Entry] = []
    start = 0
    for i in removed:  # the kept runs between removed entries, copied whole
        shaped += entries[start:i]
        start = i + 1
    shaped += entries[start:]
    relinked = 0
    parent, logical_parent = LINK_FIELDS
    if parents:
        for n, entry in enumerate(shaped):
            if entry.get(parent) in parents or entry.get(logical_parent) in parents:
                shaped[n] = {
                    **entry,
                    **{f: kept(entry[f]) for f in LINK_FIELDS if entry.get(f) in parents},
                }
                relinked += 1
    _bump(report, "relinked", relinked)
    return shaped


def _denied_calls(entries: Sequence[Entry], survey: Survey) -> list[tuple[Position, Position]]:
    """(tool_use position, tool_result position) of each refused call, oldest first.
    Calls touching a protected entry are left out."""
    calls = []
    for use, (i, j), name in survey.failed_calls:
        entry = entries[i]
        if is_denial(entry, blocks(entry)[j], name) and not (
            is_protected(entry) or is_protected(entries[use[0]])
        ):
            calls.append((use, (i, j)))
    return calls


def prune(
    entries: Sequence[Entry],
    policy: PrunePolicy,
    *,
    report: Report | None = None,
    survey: Survey | None = None,
) -> list[Entry]:
    """Remove API-error residue and all but the newest ``keep_denials`` refused calls.

    ``survey`` saves a walk over ``entries`` when the caller has their :class:`Survey`.
    """
    survey = survey if survey is not None else Survey(entries)
    errors = {
        entries[i]["uuid"]
        for i in survey.api_errors
        if not is_protected(entries[i]) and "uuid" in entries[i]
    }
    denied = _denied_calls(entries, survey)
    dropped = denied[: max(0, len(denied) - policy.keep_denials)]
    drops: dict[int, set[int]] = {}
    for position in (p for call in dropped for p in call):
        drops.setdefault(position[0], set()).add(position[1])

    shaped = list(entries)
    emptied: set[str] = set()
    for i, indices in drops.items():
        kept = drop_blocks(shaped[i], indices)
        if kept is None and "uuid" in shaped[i]:
            emptied.add(shaped[i]["uuid"])  # stays in the list for relink to walk through
        elif kept is not None:
            shaped[i] = kept
    _bump(report, "pruned_errors", len(errors))
    _bump(report, "pruned_denials", len(dropped))
    return relink(shaped, errors | emptied, report=report)


def _orphans(entries: Sequence[Entry]) -> dict[int, list[str]]:
    """Unanswered tool_use ids, keyed by the index of the last entry of their API response."""
    answered: set[Any] = set()
    last_of: dict[Any, int] = {}
    calls: dict[Any, list[dict[str, Any]]] = {}  # tool_use blocks by response
    for i, entry in enumerate(entries):
        response = None
        if entry.get("type") == "assistant" and "uuid" in entry:
            response = entry.get("message", {}).get("id") or entry["uuid"]
            last_of[response] = i
        for block in blocks(entry):
            kind = block.get("type")
            if kind == "tool_result":
                answered.add(block.get("tool_use_id"))
            elif kind == "tool_use" and response is not None:
                calls.setdefault(response, []).append(block)
    orphans = {}
    for response, uses in calls.items():
        ids = [block["id"] for block in uses if block.get("id") not in answered]
        if ids:
            orphans[last_of[response]] = ids
    return orphans


def _nothing_to_heal(entries: Sequence[Entry], survey: Survey) -> bool:
    """True if :func:`heal_orphans` can find nothing in what :func:`prune` leaves of
    ``entries``, as their ``survey`` shows: every tool_use has a unique string id and a
    tool_result somewhere, and no API-error entry holds a tool_result.

    Then no call loses its answer to prune: a refusal goes with the one tool_use it
    answers, and only API-error entries are removed with blocks that were not dropped.
    """
    return (
        len(survey.tool_uses) == survey.tool_use_blocks
        and survey.answered.issuperset(survey.tool_uses)
        and not any(
            block.get("type") == "tool_result"
            for i in survey.api_errors
            for block in blocks(entries[i])
        )
    )


def _healing(anchor: Entry, tool_use_ids: list[str], text: str) -> Entry:
    results = [
        {"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": True}
        for tid in tool_use_ids
    ]
    return _result(anchor, results, _HEAL_NAMESPACE, f"Error: {text}")


def answer_entry(anchor: Entry, answers: Mapping[str, str]) -> Entry:
    """Real results (tool_use id -> text) for calls of `anchor` (the last entry of their API
    response) that came after the calls' process was gone (flower.core.askagain: a question
    asked again), to be stored below `anchor`: from then on the calls are answered, not
    healed."""
    content = [
        {"type": "tool_result", "tool_use_id": tid, "content": said}
        for tid, said in answers.items()
    ]
    return _result(anchor, content, _ANSWER_NAMESPACE, "\n\n".join(answers.values()))


def _result(anchor: Entry, content: list[dict[str, Any]], space: uuid.UUID, said: str) -> Entry:
    return {
        "type": "user",
        "parentUuid": anchor["uuid"],
        "uuid": str(uuid.uuid5(space, anchor["uuid"])),
        **{f: anchor[f] for f in _SESSION_FIELDS if f in anchor},
        "message": {"role": "user", "content": content},
        "toolUseResult": said,
        "sourceToolAssistantUUID": anchor["uuid"],
    }


def is_healing(entry: Entry) -> bool:
    """Whether `entry` is a result :func:`heal_orphans` made up (its uuid derives from the
    call's entry): it says the call was cut, not what the call did."""
    anchor = entry.get("sourceToolAssistantUUID")
    return isinstance(anchor, str) and entry.get("uuid") == str(uuid.uuid5(_HEAL_NAMESPACE, anchor))


def heal_orphans(
    entries: Sequence[Entry], *, text: str, report: Report | None = None
) -> list[Entry]:
    """Insert a result for every unanswered tool_use (see the module docstring)."""
    orphans = _orphans(entries)
    _bump(report, "healed_orphans", sum(len(ids) for ids in orphans.values()))
    if not orphans:
        return list(entries)
    healings = {i: _healing(entries[i], ids, text) for i, ids in orphans.items()}
    moved = {entries[i]["uuid"]: healing["uuid"] for i, healing in healings.items()}
    healed: list[Entry] = []
    for i, entry in enumerate(entries):
        if entry.get("parentUuid") in moved:
            entry = {**entry, "parentUuid": moved[entry["parentUuid"]]}
        healed.append(entry)
        if i in healings:
            healed.append(healings[i])
    return healed


class PruningSessionStore(TrimmingSessionStore):
    """The store Runtime uses: load() = raw -> expire -> trim -> prune -> heal_orphans.

    Attributes as :class:`TrimmingSessionStore`, plus ``prune`` (the :class:`PrunePolicy`);
    ``last_report`` adds ``pruned_errors``, ``pruned_denials``, ``relinked`` and
    ``healed_orphans``.
    """

    def __init__(
        self,
        path: str | Path,
        workspace: str | Path,
        policy: TrimPolicy | None = None,
        prune: PrunePolicy | None = None,
        ephemeral: EphemeralPolicy | None = None,
    ) -> None:
        super().__init__(path, workspace, policy=policy, ephemeral=ephemeral)
        self.prune = prune if prune is not None else PrunePolicy()

    def reshape(
        self, entries: list[Entry], report: dict[str, int], *, survey: Survey | None = None
    ) -> list[Entry]:
        survey = survey if survey is not None else Survey(entries)
        entries = super().reshape(entries, report, survey=survey)
        if self.prune.enabled:
            # Asked before prune, while the survey still describes the entries; a walk
            # over the whole transcript is saved in the usual case.
            healthy = self.prune.heal_orphans and _nothing_to_heal(entries, survey)
            entries = prune(entries, self.prune, report=report, survey=survey)
            if healthy:
                _bump(report, "healed_orphans", 0)
            elif self.prune.heal_orphans:
                entries = heal_orphans(entries, text=self.prune.orphan_text, report=report)
        return entries
