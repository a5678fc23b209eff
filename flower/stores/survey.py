"""Survey: what the load-time layers need to know about a transcript, found in one pass.

expire, trim and prune each need the same facts: which tool_use a result answers, how many
turns old an entry is, where the tool results, failed calls and API errors are. A
:class:`Survey` finds them all in one forward walk over the entries and their blocks, so the
layers visit only the positions they may change instead of walking the whole transcript
once per rule.

A survey describes the list it was taken of, and stays true of any list that differs from
it only in the ``content`` of tool_result blocks: that is all expire and trim change, so
one survey serves expire, trim and prune in a row. prune removes entries and blocks; after
it, a survey of the old list is stale.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any, NamedTuple

from flower.stores.transcript import Entry, is_protected

__all__ = ["Call", "Position", "Survey"]

Position = tuple[int, int]
"""(entry index, block index)."""


class Call(NamedTuple):
    """A tool_use and the tool_result that answers it."""

    use: Position
    result: Position
    name: str
    """The tool's name, as the tool_use block gives it ("" if it gives none)."""


class Survey:
    """The facts below about ``entries``, found in one pass (see the module docstring).

    Attributes:
        tool_uses: every tool_use block of an assistant entry whose id is a string, by id
            (a later block with the same id wins).
        results: positions of the tool_result blocks of unprotected user entries, in order:
            the results expire and trim may rewrite.
        failed_calls: each ``is_error: true`` tool_result (in any entry) that answers a
            tool_use of an assistant entry before it, paired with the latest such tool_use;
            in order. Refusals are among these.
        api_errors: indices of the entries that are API-error residue (``is_api_error``).
        answered: the ``tool_use_id`` of every tool_result block (in any entry).
        tool_use_blocks: how many tool_use blocks the assistant entries hold; equal to
            ``len(tool_uses)`` when their ids are unique strings.
    """

    __slots__ = (
        "_ends",
        "answered",
        "api_errors",
        "failed_calls",
        "results",
        "tool_use_blocks",
        "tool_uses",
    )

    def __init__(self, entries: Sequence[Entry]) -> None:
        # One loop over the whole transcript: the rules of transcript.py (is_api_error,
        # is_protected, blocks) and the turn an assistant entry belongs to (its message.id,
        # else its uuid; a synthetic error is no turn) are inlined and asked only of the
        # entries they can concern. Locals, not attributes, for the same reason.
        tool_uses: dict[str, dict[str, Any]] = {}
        results: list[Position] = []
        failed_calls: list[Call] = []
        api_errors: list[int] = []
        answered: set[Any] = set()
        tool_use_blocks = 0
        last_entry_of: dict[Any, int] = {}
        uses: dict[Any, tuple[int, int, dict[str, Any]]] = {}
        for i, entry in enumerate(entries):
            kind = entry.get("type")
            message = entry.get("message")
            if not isinstance(message, dict):  # no blocks; an assistant's turn is its uuid
                if kind == "assistant" and (turn := entry.get("uuid")) is not None:
                    last_entry_of[turn] = i
                elif kind == "system" and entry.get("subtype") == "api_error":
                    api_errors.append(i)
                continue
            if kind == "assistant":
                if entry.get("isApiErrorMessage") is True and message.get("model") == "<synthetic>":
                    api_errors.append(i)
                else:
                    turn = message.get("id")
                    if not isinstance(turn, str):
                        turn = entry.get("uuid")
                    if turn is not None:
                        last_entry_of[turn] = i
            elif kind == "system" and entry.get("subtype") == "api_error":
                api_errors.append(i)
            content = message.get("content")
            if not isinstance(content, list):
                continue
            rewritable: bool | None = None  # asked at the first tool_result, if any
            for j, block in enumerate(content):
                block_type = block.get("type")
                if block_type == "tool_use":
                    if kind == "assistant":
                        tool_id = block.get("id", "")
                        if isinstance(tool_id, str):
                            tool_uses[tool_id] = block
                        uses[tool_id] = (i, j, block)
                        tool_use_blocks += 1
                elif block_type == "tool_result":
                    answered.add(tool_use_id := block.get("tool_use_id"))
                    if rewritable is None:
                        rewritable = kind == "user" and not is_protected(entry)
                    if rewritable:
                        results.append((i, j))
                    if block.get("is_error") is True and tool_use_id in uses:
                        ui, uj, use = uses[tool_use_id]
                        failed_calls.append(Call((ui, uj), (i, j), str(use.get("name", ""))))
        self.tool_uses = tool_uses
        self.results = results
        self.failed_calls = failed_calls
        self.api_errors = api_errors
        self.answered = answered
        self.tool_use_blocks = tool_use_blocks
        self._ends = sorted(last_entry_of.values())

    def age(self, index: int) -> int:
        """How many API responses of the model come after entry ``index`` (its age in turns).

        A tool result the model has not answered yet has age 0; one it has answered once, 1.
        Synthetic error messages are not responses and do not count. Ages never grow along
        the transcript.
        """
        return len(self._ends) - bisect_right(self._ends, index)

    def older_than(self, keep_recent: int) -> int:
        """The index before which every entry is more than ``keep_recent`` turns old.

        ``age(i) > keep_recent`` exactly when ``i < older_than(keep_recent)``: ages never
        grow along the transcript, so one bound replaces an age look-up per entry.
        """
        count = len(self._ends) - keep_recent
        return self._ends[count - 1] if count > 0 else 0
