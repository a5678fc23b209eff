"""The Survey the layers share, and the store's one-walk load() against the public steps.

PruningSessionStore.load() surveys the transcript once, applies expire and trim in one walk
over the old results and skips heal_orphans' walk when the survey proves it has nothing to
do. It must hand back exactly what the public functions give when applied one after the
other, each surveying for itself.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flower.stores import EphemeralPolicy, PrunePolicy, PruningSessionStore, TrimPolicy
from flower.stores.prune import heal_orphans, prune
from flower.stores.survey import Call, Survey
from flower.stores.transcript import blocks
from flower.stores.trim import expire, trim
from tests.stores.stores_chat import Chat
from tests.stores.test_redlines import STEPS, build

Entries = list[dict[str, Any]]


def test_ages_count_later_responses_not_entries() -> None:
    chat = Chat()
    chat.prompt("go")  # 0
    chat.response({"type": "text", "text": "a"}, {"type": "text", "text": "b"})  # 1, 2
    chat.api_error()  # 3, 4: not a response
    chat.say()  # 5
    survey = Survey(chat.entries)
    # Entry 1 is followed by the rest of its own response (entry 2) and by entry 5's.
    assert [survey.age(i) for i in range(len(chat.entries))] == [2, 2, 1, 1, 1, 0]


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(STEPS, max_size=40), keep=st.integers(0, 5))
def test_older_than_bounds_exactly_the_entries_older_than_keep_recent(
    steps: list[str], keep: int
) -> None:
    # The rewrite walk tests `index < older_than(keep)` instead of asking each age.
    survey = Survey(build(steps))
    bound = survey.older_than(keep)
    indices = range(len(build(steps)))
    assert [i < bound for i in indices] == [survey.age(i) > keep for i in indices]


def test_what_the_survey_finds() -> None:
    chat = Chat()
    use, result = chat.bash("ls", "a")
    denied_use, refusal = chat.deny("rm x")
    chat.add({"type": "user", "isMeta": True, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": use["message"]["content"][0]["id"], "content": "m"}
    ]}})  # fmt: skip
    errors = chat.api_error()
    survey = Survey(chat.entries)
    ids = [u["message"]["content"][0]["id"] for u in (use, denied_use)]
    assert list(survey.tool_uses) == ids and survey.tool_use_blocks == 2
    assert survey.results == [(1, 0), (3, 0)]  # the meta entry's result is not rewritable
    assert survey.failed_calls == [Call((2, 0), (3, 0), "Bash")]
    assert survey.api_errors == [chat.entries.index(e) for e in errors]
    assert survey.answered == set(ids)
    assert result in chat.entries and refusal in chat.entries


def one_by_one(entries: Entries, workspace: Path, policies: dict[str, Any]) -> Entries:
    report = policies["report"]
    shaped = expire(entries, policies["ephemeral"], report=report)
    shaped = trim(shaped, policies["policy"], workspace, report=report)
    shaped = prune(shaped, policies["prune"], report=report)
    return heal_orphans(shaped, text=policies["prune"].orphan_text, report=report)


def loaded(entries: Entries, workspace: Path, policies: dict[str, Any]) -> Entries:
    store = PruningSessionStore(
        workspace / "sessions.db",
        workspace,
        policy=policies["policy"],
        ephemeral=policies["ephemeral"],
        prune=policies["prune"],
    )
    try:
        return store.reshape(list(entries), policies["report"])
    finally:
        store.close()


def compare(entries: Entries, keep: int = 1, keep_denials: int = 0) -> Entries:
    """The store's load of ``entries`` after checking it equals the steps one by one."""
    results = []
    with tempfile.TemporaryDirectory() as workspace:
        for shape in (one_by_one, loaded):
            policies = {
                "ephemeral": EphemeralPolicy(keep_recent=keep),
                "policy": TrimPolicy(keep_recent=keep + 1, min_chars=100),
                "prune": PrunePolicy(keep_denials=keep_denials),
                "report": {},
            }
            results.append((shape(entries, Path(workspace).resolve(), policies), policies))
    (expected, expected_policies), (got, got_policies) = results
    assert got == expected
    assert got_policies["report"] == expected_policies["report"]
    return got


def test_a_duplicated_tool_id_still_gets_healed_when_its_refusal_goes() -> None:
    chat = Chat()
    use, _ = chat.deny("rm x")
    tool_id = use["message"]["content"][0]["id"]
    chat.response({"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}})
    chat.say()
    out = compare(chat.entries)
    healed = [b for e in out for b in blocks(e) if b.get("tool_use_id") == tool_id]
    assert [b["content"] for b in healed] == [PrunePolicy().orphan_text]


def test_an_answer_inside_api_error_residue_goes_with_it_and_is_healed() -> None:
    chat = Chat()
    use = chat.response({"type": "tool_use", "id": "t1", "name": "Bash", "input": {}})[0]
    _, synthetic = chat.api_error()
    synthetic["message"]["content"].append(
        {"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": False}
    )
    out = compare(chat.entries)
    assert use in out and any(b.get("tool_use_id") == "t1" for e in out for b in blocks(e))


Edit = Callable[[Entries, st.DataObject], None]


def _duplicate_an_id(entries: Entries, data: st.DataObject) -> None:
    uses = [b for e in entries for b in blocks(e) if b.get("type") == "tool_use"]
    if len(uses) >= 2:
        data.draw(st.sampled_from(uses))["id"] = data.draw(st.sampled_from(uses))["id"]


def _answer_inside_an_error(entries: Entries, data: st.DataObject) -> None:
    results = [b for e in entries for b in blocks(e) if b.get("type") == "tool_result"]
    synthetic = [e for e in entries if e.get("isApiErrorMessage")]
    if results and synthetic:
        result = copy.deepcopy(data.draw(st.sampled_from(results)))
        data.draw(st.sampled_from(synthetic))["message"]["content"].append(result)


def _swap_neighbours(entries: Entries, data: st.DataObject) -> None:
    if len(entries) >= 2:
        i = data.draw(st.integers(0, len(entries) - 2))
        entries[i], entries[i + 1] = entries[i + 1], entries[i]


EDITS = st.lists(st.sampled_from([_duplicate_an_id, _answer_inside_an_error, _swap_neighbours]))


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(STEPS, max_size=40),
    keep=st.integers(0, 3),
    keep_denials=st.integers(0, 2),
    edits=EDITS,
    data=st.data(),
)
def test_load_equals_the_steps_one_by_one(
    steps: list[str], keep: int, keep_denials: int, edits: list[Edit], data: st.DataObject
) -> None:
    entries = build(steps)
    for edit in edits:
        edit(entries, data)
    pristine = copy.deepcopy(entries)
    compare(entries, keep, keep_denials)
    assert entries == pristine
