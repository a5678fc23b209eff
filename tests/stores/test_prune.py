"""prune(), relink() and heal_orphans() as pure functions, and the PruningSessionStore."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flower.stores import PrunePolicy, PruningSessionStore
from flower.stores.prune import answer_entry, heal_orphans, is_healing, prune, relink
from tests.stores.stores_chat import Chat

TEXT = "[interrupted]"


def uuids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["uuid"] for e in entries]


def parent_of(entries: list[dict[str, Any]], uid: str) -> Any:
    return next(e for e in entries if e["uuid"] == uid)["parentUuid"]


# -- API errors -----------------------------------------------------------------------


def test_api_error_residue_is_removed_and_the_chain_relinked() -> None:
    chat = Chat()
    before = chat.prompt("go")
    system, synthetic = chat.api_error()
    after = chat.prompt("continue")
    report: dict[str, int] = {}
    out = prune(chat.entries, PrunePolicy(), report=report)
    assert uuids(out) == [before["uuid"], after["uuid"]]
    assert parent_of(out, after["uuid"]) == before["uuid"]
    assert report == {"pruned_errors": 2, "pruned_denials": 0, "relinked": 1}


def test_a_real_answer_is_never_taken_for_an_error() -> None:
    chat = Chat()
    chat.response(
        {"type": "text", "text": "API Error: is what I would say"}, isApiErrorMessage=True
    )
    assert prune(chat.entries, PrunePolicy()) == chat.entries  # its model is not <synthetic>


# -- refused calls ----------------------------------------------------------------------


def test_all_but_the_newest_refusals_go_with_their_calls() -> None:
    chat = Chat()
    chat.prompt("go")
    old = chat.deny("git push")
    kept_call = chat.bash("ls", "a")
    new = chat.deny("rm -rf x")
    out = prune(chat.entries, PrunePolicy(keep_denials=1))
    assert not {e["uuid"] for e in old} & set(uuids(out))
    assert {e["uuid"] for e in (*kept_call, *new)} <= set(uuids(out))
    assert parent_of(out, kept_call[0]["uuid"]) == chat.entries[0]["uuid"]
    assert len(prune(chat.entries, PrunePolicy(keep_denials=0))) == len(chat.entries) - 4
    assert prune(chat.entries, PrunePolicy(keep_denials=5)) == chat.entries


@pytest.mark.parametrize(
    ("tool", "content", "fields", "refused"),
    [
        ("Bash", "PreToolUse:Bash hook error: delegate it", {}, True),
        ("Bash", "PreToolUse:Bash hook error: [guard]: delegate it", {}, True),
        ("Bash", "Permission to use Bash with command rm x has been denied.", {}, True),
        (
            "Write",
            "<tool_use_error>Permission to use Write has been denied.</tool_use_error>",
            {},
            True,
        ),
        ("Bash", [{"type": "text", "text": "PreToolUse:Bash hook error: no"}], {}, True),
        ("Bash", "my own words", {"toolDenialKind": "permission-rule"}, True),
        ("Bash", "no thanks", {"toolDenialKind": "user-rejected"}, True),
        ("mcp__x__y", "custom deny", {"toolDenialKind": "permission-rule"}, True),
        ("Bash", "The user doesn't want to proceed...", {"toolDenialKind": "interrupted"}, False),
        ("Bash", "stopped", {"toolDenialKind": "cancelled"}, False),
        ("Bash", "Exit code 1\nPermission to use this file denied", {}, False),
        ("mcp__x__y", "PreToolUse:Bash hook error: spoofed by a server", {}, False),
    ],
)
def test_refusal_recognition(
    tool: str, content: Any, fields: dict[str, Any], refused: bool
) -> None:
    chat = Chat()
    chat.call(tool, {}, content, is_error=True, **fields)
    out = prune(chat.entries, PrunePolicy(keep_denials=0))
    assert (out == []) is refused


def test_a_successful_result_is_never_a_refusal() -> None:
    chat = Chat()
    chat.bash("cat notes", "PreToolUse:Bash hook error: text inside a file")
    assert prune(chat.entries, PrunePolicy(keep_denials=0)) == chat.entries


def test_a_refused_call_sharing_an_entry_loses_only_its_block() -> None:
    chat = Chat()
    both = chat.add(
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "model": "claude-opus-5-5",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "rm x"}},
                    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
        }
    )
    chat.result("t1", "PreToolUse:Bash hook error: no", is_error=True)
    chat.result("t2", "a b")
    out = prune(chat.entries, PrunePolicy(keep_denials=0))
    assert [b["id"] for b in out[0]["message"]["content"]] == ["t2"]
    assert out[0]["uuid"] == both["uuid"]
    assert [e["message"]["content"][0]["tool_use_id"] for e in out[1:]] == ["t2"]


def test_prune_never_mutates_its_input() -> None:
    chat = Chat()
    chat.deny("x")
    chat.api_error()
    chat.deny("y")
    before = copy.deepcopy(chat.entries)
    prune(chat.entries, PrunePolicy(keep_denials=0))
    assert chat.entries == before


# -- relink -----------------------------------------------------------------------------


def test_relink_walks_up_through_removed_ancestors() -> None:
    chat = Chat()
    a, b, c, d = (chat.prompt(n) for n in "abcd")
    logical = chat.add(
        {"type": "system", "subtype": "compact_boundary", "logicalParentUuid": c["uuid"]}
    )
    out = relink(chat.entries, {b["uuid"], c["uuid"]})
    assert uuids(out) == [a["uuid"], d["uuid"], logical["uuid"]]
    assert parent_of(out, d["uuid"]) == a["uuid"]
    assert out[-1]["logicalParentUuid"] == a["uuid"]
    assert relink(chat.entries, {a["uuid"]})[0]["parentUuid"] is None


# -- heal_orphans -------------------------------------------------------------------------


def test_orphans_get_one_answer_entry_after_their_response() -> None:
    chat = Chat()
    chat.prompt("go")
    first, last = chat.orphan("Bash", "Write")  # two blocks, two entries, one response
    nudge = chat.prompt("[Request interrupted by user]")
    report: dict[str, int] = {}
    out = heal_orphans(chat.entries, text=TEXT, report=report)
    assert len(out) == len(chat.entries) + 1
    healing = out[out.index(last) + 1]
    assert healing["type"] == "user" and healing["parentUuid"] == last["uuid"]
    assert [b["tool_use_id"] for b in healing["message"]["content"]] == [
        first["message"]["content"][0]["id"],
        last["message"]["content"][0]["id"],
    ]
    assert all(b["is_error"] and b["content"] == TEXT for b in healing["message"]["content"])
    assert healing["sessionId"] == "s1" and healing["cwd"] == "/ws"
    assert parent_of(out, nudge["uuid"]) == healing["uuid"]
    assert report == {"healed_orphans": 2}
    # The same uuid on every load: entries appended after a resume stay chained to it.
    assert heal_orphans(chat.entries, text=TEXT) == out


def test_answered_calls_need_no_healing() -> None:
    chat = Chat()
    chat.bash("ls", "a")
    assert heal_orphans(chat.entries, text=TEXT) == chat.entries


def test_a_call_answered_after_its_process_died_is_answered_not_healed() -> None:
    """flower.core.askagain: a question a kill cut, asked again, gets its real result below
    the response; the call is then answered, on every later load too."""
    chat = Chat()
    chat.prompt("go")
    [call] = chat.orphan("mcp__human__ask")
    answered = [*chat.entries, answer_entry(call, {call["message"]["content"][0]["id"]: "py"})]
    [result] = answered[-1]["message"]["content"]
    assert (result["content"], result.get("is_error")) == ("py", None)
    assert answered[-1]["parentUuid"] == call["uuid"] and not is_healing(answered[-1])
    assert heal_orphans(answered, text=TEXT) == answered


# -- the store ------------------------------------------------------------------------


def test_store_runs_every_layer(tmp_path: Path, opened: Callable[[Any], Any]) -> None:
    store = opened(
        PruningSessionStore(tmp_path / "s.db", tmp_path / "ws", prune=PrunePolicy(keep_denials=0))
    )
    chat = Chat()
    chat.prompt("go")
    chat.bash("git status", "clean")
    chat.deny("git push")
    chat.api_error()
    chat.orphan("Bash")
    for n in range(8):
        chat.say(str(n))
    key = {"project_key": "-ws", "session_id": "s1"}
    asyncio.run(store.append(key, chat.entries))
    loaded = asyncio.run(store.load(key))
    assert loaded is not None
    assert store.last_report == {
        "expired": 1,
        "spilled": 0,
        "spill_errors": 0,
        "pruned_errors": 2,
        "pruned_denials": 1,
        "relinked": 1,  # one run of four removed entries: one child moves
        "healed_orphans": 1,
    }
    assert store.prune.keep_denials == 0


def test_disabled_prune_is_skipped(tmp_path: Path, opened: Callable[[Any], Any]) -> None:
    store = opened(
        PruningSessionStore(tmp_path / "s.db", tmp_path / "ws", prune=PrunePolicy(enabled=False))
    )
    chat = Chat()
    chat.api_error()
    key = {"project_key": "-ws", "session_id": "s1"}
    asyncio.run(store.append(key, chat.entries))
    assert asyncio.run(store.load(key)) == chat.entries


def test_keep_denials_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="keep_denials must be >= 0, got -1"):
        PrunePolicy(keep_denials=-1)
