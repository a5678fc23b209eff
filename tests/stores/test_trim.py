"""expire() and trim() as pure functions, and the TrimmingSessionStore that chains them."""

from __future__ import annotations

import asyncio
import copy
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flower.stores import EphemeralPolicy, TrimmingSessionStore, TrimPolicy
from flower.stores.trim import expire, trim
from tests.stores.stores_chat import Chat

BIG = "line of build output\n" * 200  # 4200 chars


def content_of(entry: dict[str, Any]) -> Any:
    return entry["message"]["content"][0]["content"]


def answered(chat: Chat, turns: int) -> None:
    """``turns`` more API responses (each is one turn of age for what came before)."""
    for n in range(turns):
        chat.say(f"step {n}")


# -- expire -----------------------------------------------------------------------------


def test_old_glances_expire_with_command_and_age() -> None:
    chat = Chat()
    chat.prompt("go")
    _, status = chat.bash("git status", "On branch main\nnothing to commit")
    answered(chat, 7)
    report: dict[str, int] = {}
    out = expire(chat.entries, EphemeralPolicy(), report=report)
    assert content_of(out[chat.entries.index(status)]) == (
        "[git status 的结果已过期(第 7 轮前),当前状态可能已变。需要请重新执行]"
    )
    assert report == {"expired": 1}


def test_age_counts_api_responses_not_entries() -> None:
    # keep_recent=6: a result 6 responses old stays, 7 responses old expires. A response of
    # three blocks is three entries but one turn.
    chat = Chat()
    _, kept = chat.bash("ls", "a\nb")
    for _ in range(5):
        chat.response(
            {"type": "thinking", "thinking": "."},
            {"type": "text", "text": "x"},
            {"type": "text", "text": "y"},
        )
    _, younger = chat.bash("pwd", "/ws")  # its tool_use response is the 6th after `ls`
    out = expire(chat.entries, EphemeralPolicy(keep_recent=5))
    assert content_of(out[chat.entries.index(kept)]).startswith("[ls 的结果已过期(第 6 轮前)")
    assert content_of(out[chat.entries.index(younger)]) == "/ws"
    out = expire(chat.entries, EphemeralPolicy(keep_recent=6))
    assert content_of(out[chat.entries.index(kept)]) == "a\nb"


@pytest.mark.parametrize(
    ("command", "output", "is_error"),
    [
        ("make test", "ok", False),  # not a glance
        ("git status", "x" * 2001, False),  # longer than max_chars: left to trim
        ("git status", "fatal: not a git repository", True),  # errors stay
        ("git status", [{"type": "text", "text": "a"}, {"type": "image", "source": {}}], False),
    ],
)
def test_what_does_not_expire(command: str, output: Any, is_error: bool) -> None:
    chat = Chat()
    chat.bash(command, output, is_error=is_error)
    answered(chat, 10)
    assert expire(chat.entries, EphemeralPolicy()) == chat.entries


def test_only_bash_results_expire() -> None:
    chat = Chat()
    chat.call("Read", {"file_path": "/ws/ls"}, "file text")
    chat.call("Grep", {"command": "ls"}, "hits")
    answered(chat, 10)
    assert expire(chat.entries, EphemeralPolicy()) == chat.entries


def test_expire_never_mutates_its_input() -> None:
    chat = Chat()
    chat.bash("ls", "a")
    answered(chat, 10)
    before = copy.deepcopy(chat.entries)
    out = expire(chat.entries, EphemeralPolicy())
    assert chat.entries == before
    assert out != before


# -- trim -------------------------------------------------------------------------------


def test_old_big_results_are_spilled_behind_a_pointer(tmp_path: Path) -> None:
    chat = Chat()
    _, old = chat.bash("make test", BIG)
    answered(chat, 21)
    report: dict[str, int] = {}
    out = trim(chat.entries, TrimPolicy(), tmp_path, report=report)
    name = hashlib.sha256(BIG.encode()).hexdigest()[:16] + ".txt"
    spilled = tmp_path / ".flower" / "spill" / name
    assert spilled.read_text() == BIG
    assert content_of(out[chat.entries.index(old)]) == (
        f"[工具结果已归档:{len(BIG)} 字符。完整内容在 {spilled},需要时用 Read 读取]"
    )
    assert report == {"spilled": 1, "spill_errors": 0}
    # The block itself and its other fields stay.
    block = out[chat.entries.index(old)]["message"]["content"][0]
    assert block["type"] == "tool_result" and block["tool_use_id"].startswith("toolu_")


def test_text_block_lists_are_spilled_joined(tmp_path: Path) -> None:
    chat = Chat()
    parts = [{"type": "text", "text": "a" * 1500}, {"type": "text", "text": "b" * 1500}]
    _, old = chat.call("Read", {"file_path": "/ws/x"}, parts)
    answered(chat, 21)
    out = trim(chat.entries, TrimPolicy(), tmp_path)
    assert content_of(out[chat.entries.index(old)]).startswith("[工具结果已归档:3001 字符。")


@pytest.mark.parametrize(
    ("content", "turns_after"),
    [
        (BIG, 20),  # recent enough
        ("x" * 1999, 30),  # too small
        ([{"type": "text", "text": BIG}, {"type": "image", "source": {"type": "base64"}}], 30),
        ([{"type": "document", "source": {}}], 30),
    ],
)
def test_what_is_not_spilled(tmp_path: Path, content: Any, turns_after: int) -> None:
    chat = Chat()
    chat.bash("make", content)
    answered(chat, turns_after)
    assert trim(chat.entries, TrimPolicy(), tmp_path) == chat.entries
    assert not (tmp_path / ".flower").exists()


def test_a_big_refusal_is_left_for_prune(tmp_path: Path) -> None:
    chat = Chat()
    chat.deny("make", reason="no " * 1000)
    answered(chat, 30)
    assert trim(chat.entries, TrimPolicy(), tmp_path) == chat.entries


def test_spilling_is_idempotent(tmp_path: Path) -> None:
    chat = Chat()
    chat.bash("make", BIG)
    chat.bash("make again", BIG)
    answered(chat, 25)
    first = trim(chat.entries, TrimPolicy(), tmp_path)
    second = trim(chat.entries, TrimPolicy(), tmp_path)
    assert first == second
    assert len(list((tmp_path / ".flower" / "spill").iterdir())) == 1


def test_an_unwritable_spill_dir_keeps_the_result(tmp_path: Path) -> None:
    (tmp_path / ".flower").write_text("a file where the spill dir should be")
    chat = Chat()
    chat.bash("make", BIG)
    answered(chat, 25)
    report: dict[str, int] = {}
    assert trim(chat.entries, TrimPolicy(), tmp_path, report=report) == chat.entries
    assert report == {"spilled": 0, "spill_errors": 1}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: TrimPolicy(keep_recent=-1), "TrimPolicy.keep_recent must be >= 0, got -1"),
        (lambda: TrimPolicy(min_chars=0), "TrimPolicy.min_chars must be >= 1, got 0"),
        (lambda: EphemeralPolicy(max_chars=0), "EphemeralPolicy.max_chars must be >= 1"),
    ],
)
def test_policies_refuse_nonsense(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make()


# -- the store ------------------------------------------------------------------------


def test_store_expires_then_trims(tmp_path: Path, opened: Callable[[Any], Any]) -> None:
    store = opened(TrimmingSessionStore(tmp_path / "s.db", tmp_path / "ws"))
    chat = Chat()
    _, glance = chat.bash("git log", "commit abc\n" * 300)  # a glance, but too long to expire
    _, short = chat.bash("git status", "clean")
    answered(chat, 25)
    key = {"project_key": "-ws", "session_id": "s1"}
    asyncio.run(store.append(key, chat.entries))
    loaded = asyncio.run(store.load(key))
    assert content_of(loaded[chat.entries.index(glance)]).startswith("[工具结果已归档:3300 字符")
    assert "已过期" in content_of(loaded[chat.entries.index(short)])
    assert store.last_report == {"expired": 1, "spilled": 1, "spill_errors": 0}
    assert store.workspace == (tmp_path / "ws").resolve()


def test_disabled_steps_are_skipped(tmp_path: Path, opened: Callable[[Any], Any]) -> None:
    store = opened(
        TrimmingSessionStore(
            tmp_path / "s.db",
            tmp_path / "ws",
            policy=TrimPolicy(enabled=False),
            ephemeral=EphemeralPolicy(enabled=False),
        )
    )
    chat = Chat()
    chat.bash("git status", BIG)
    answered(chat, 25)
    key = {"project_key": "-ws", "session_id": "s1"}
    asyncio.run(store.append(key, chat.entries))
    assert asyncio.run(store.load(key)) == chat.entries
    assert store.last_report == {}
    assert asyncio.run(store.load({"project_key": "-ws", "session_id": "none"})) is None
