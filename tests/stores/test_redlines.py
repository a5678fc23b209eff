"""The store's red lines (DESIGN.md, layer 4), on hand-made cases and random transcripts:

(a) a tool_result block whose tool_use stays is never removed (a pruned refusal takes the
    call and its result together);
(b) isCompactSummary / isMeta entries are never removed and their content never changes;
(c) a removed entry's children are relinked to its parent;
and the rows in SQLite are never modified by load().
"""

from __future__ import annotations

import asyncio
import copy
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flower.stores import EphemeralPolicy, PrunePolicy, PruningSessionStore, TrimPolicy
from flower.stores.prune import heal_orphans, prune
from flower.stores.transcript import LINK_FIELDS, blocks
from flower.stores.trim import expire, trim
from tests.stores.stores_chat import Chat

BIG = "x" * 2500


def all_layers(
    entries: list[dict[str, Any]], workspace: Path, keep_denials: int = 0
) -> list[dict[str, Any]]:
    shaped = expire(entries, EphemeralPolicy(keep_recent=1))
    shaped = trim(shaped, TrimPolicy(keep_recent=1), workspace)
    shaped = prune(shaped, PrunePolicy(keep_denials=keep_denials))
    return heal_orphans(shaped, text="[healed]")


def ids(entries: list[dict[str, Any]], kind: str) -> list[str]:
    key = "id" if kind == "tool_use" else "tool_use_id"
    return [b[key] for e in entries for b in blocks(e) if b.get("type") == kind]


def without_links(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in LINK_FIELDS}


def check_red_lines(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    # (a) every call that stays keeps (at least) its result, and every call has one.
    results_before, results_after = set(ids(before, "tool_result")), set(ids(after, "tool_result"))
    uses_after = set(ids(after, "tool_use"))
    assert uses_after & results_before <= results_after
    assert uses_after <= results_after
    assert results_after <= uses_after | (results_before - set(ids(before, "tool_use")))
    # (b) protected entries all survive with the same content.
    kept = {e["uuid"]: e for e in after}
    for entry in before:
        if entry.get("isMeta") or entry.get("isCompactSummary"):
            assert without_links(kept[entry["uuid"]]) == without_links(entry)
    # (c) no link points at a removed entry; each points at the nearest kept ancestor.
    parents = {e["uuid"]: e.get("parentUuid") for e in before}
    for entry in after:
        link = entry.get("parentUuid")
        assert link is None or link in kept
        if entry["uuid"] in parents and link in parents:
            walk = parents[entry["uuid"]]
            while walk is not None and walk not in kept:
                walk = parents[walk]
            healing = kept.get(link, {}).get("parentUuid") == walk
            assert link == walk or healing  # heal_orphans may sit in between


# -- hand-made cases ----------------------------------------------------------------------


def test_protected_entries_survive_every_layer(tmp_path: Path) -> None:
    chat = Chat()
    chat.prompt("go")
    chat.compact("This session is being continued from a previous conversation. " + BIG)
    chat.bash("git status", "clean")
    # A protected entry that every rule would otherwise touch: an old ephemeral result,
    # an old big result, a refusal.
    use = chat.response(
        {"type": "tool_use", "id": "tm", "name": "Bash", "input": {"command": "ls"}}
    )[0]
    block = {"type": "tool_result", "tool_use_id": "tm", "content": "a", "is_error": False}
    chat.add({"type": "user", "isMeta": True, "message": {"role": "user", "content": [block]}})
    chat.meta("Your response above was cut off mid-stream. Resume directly.")
    denied_use = chat.response(
        {"type": "tool_use", "id": "td", "name": "Bash", "input": {"command": "rm"}}
    )[0]
    refusal = {
        "type": "tool_result",
        "tool_use_id": "td",
        "content": "PreToolUse:Bash hook error: no",
        "is_error": True,
    }
    chat.add({"type": "user", "isMeta": True, "message": {"role": "user", "content": [refusal]}})
    for n in range(5):
        chat.say(str(n))
    out = all_layers(chat.entries, tmp_path)
    check_red_lines(chat.entries, out)
    assert use in out and denied_use in out


def test_a_pruned_refusal_takes_call_and_result_together(tmp_path: Path) -> None:
    chat = Chat()
    use, result = chat.deny("git push")
    chat.say()
    out = all_layers(chat.entries, tmp_path)
    assert use["uuid"] not in {e["uuid"] for e in out}
    assert result["uuid"] not in {e["uuid"] for e in out}
    check_red_lines(chat.entries, out)


def test_a_removed_entrys_children_hang_from_its_parent(tmp_path: Path) -> None:
    chat = Chat()
    first = chat.prompt("go")
    chat.api_error()
    chat.api_error()
    child = chat.prompt("again")
    out = all_layers(chat.entries, tmp_path)
    assert [e["uuid"] for e in out] == [first["uuid"], child["uuid"]]
    assert out[1]["parentUuid"] == first["uuid"]


def test_load_never_modifies_the_rows(tmp_path: Path, opened: Callable[[Any], Any]) -> None:
    db = tmp_path / "sessions.db"
    store = opened(PruningSessionStore(db, tmp_path / "ws", prune=PrunePolicy(keep_denials=0)))
    chat = Chat()
    chat.prompt("go")
    chat.bash("make", BIG)
    chat.bash("git status", "clean")
    chat.deny("rm -rf /")
    chat.api_error()
    chat.orphan("Bash")
    for n in range(25):
        chat.say(str(n))
    key = {"project_key": "-ws", "session_id": "s1"}
    asyncio.run(store.append(key, chat.entries))

    def payloads() -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(db)
        try:
            return conn.execute(
                "SELECT store_key, seq, uid, payload FROM entries ORDER BY seq"
            ).fetchall()
        finally:
            conn.close()

    before = payloads()
    loaded = asyncio.run(store.load(key))
    assert loaded != chat.entries and sum(store.last_report.values()) >= 5
    assert payloads() == before
    assert store.read(key) == chat.entries


# -- random transcripts -------------------------------------------------------------------

STEPS = st.sampled_from(
    [
        "prompt",
        "say",
        "glance",
        "big",
        "image",
        "deny",
        "error",
        "orphan",
        "meta",
        "compact",
        "parallel",
    ]
)


def build(steps: list[str]) -> list[dict[str, Any]]:
    chat = Chat()
    for n, step in enumerate(steps):
        match step:
            case "prompt":
                chat.prompt(f"p{n}")
            case "say":
                chat.say(f"s{n}")
            case "glance":
                chat.bash("git status", f"state {n}")
            case "big":
                chat.bash(f"make {n}", BIG + str(n))
            case "image":
                chat.call(
                    "Read", {}, [{"type": "text", "text": BIG}, {"type": "image", "source": {}}]
                )
            case "deny":
                chat.deny(f"rm {n}")
            case "error":
                chat.api_error()
            case "orphan":
                chat.orphan("Bash", "Read")
            case "meta":
                chat.meta(f"nudge {n}")
            case "compact":
                chat.compact(f"summary {n}")
            case "parallel":
                chat.response(
                    {
                        "type": "tool_use",
                        "id": f"pa{n}",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                    {
                        "type": "tool_use",
                        "id": f"pb{n}",
                        "name": "Bash",
                        "input": {"command": "rm x"},
                    },
                )
                chat.result(f"pa{n}", "listing")
                chat.result(f"pb{n}", "PreToolUse:Bash hook error: no", is_error=True)
    return chat.entries


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(STEPS, max_size=40), keep_denials=st.integers(0, 3))
def test_red_lines_hold_on_random_transcripts(steps: list[str], keep_denials: int) -> None:
    entries = build(steps)
    pristine = copy.deepcopy(entries)
    with tempfile.TemporaryDirectory() as workspace:
        out = all_layers(entries, Path(workspace), keep_denials)
    assert entries == pristine  # inputs are never mutated
    check_red_lines(entries, out)
