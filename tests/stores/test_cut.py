"""flower.stores.cut: which subagents were cut short, and what they had done."""

from __future__ import annotations

from typing import Any

from flower.stores.cut import Call, cut_short
from flower.stores.prune import heal_orphans
from flower.stores.records import SessionTranscript


def assistant(*uses: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    content = [{"type": "tool_use", "id": i, "name": n, "input": given} for i, n, given in uses]
    return {"type": "assistant", "uuid": f"u-{uses[0][0]}", "message": {"content": content}}


def result(tool_use_id: str, said: str, *, error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": said}
    return {"type": "user", "message": {"content": [{**block, "is_error": error}]}}


def meta(tool_use_id: str, *, finished: bool = False) -> dict[str, Any]:
    found = {"type": "agent_metadata", "agentType": "coder", "toolUseId": tool_use_id}
    return {**found, "finished": True} if finished else found


def worker(agent: str, *entries: dict[str, Any]) -> list[dict[str, Any]]:
    """A subagent transcript: its metadata first, then its task, then `entries`."""
    metas = [e for e in entries if e["type"] == "agent_metadata"]
    task = {"type": "user", "message": {"content": "the task"}}
    rest = [task, *(e for e in entries if e["type"] != "agent_metadata")]
    return [*metas[:1], *({**e, "agentId": agent, "cwd": "/ws"} for e in rest), *metas[1:]]


TASK = {"description": "write calc", "prompt": "write calc.py"}


def transcript(main: list[dict[str, Any]], **subs: list[dict[str, Any]]) -> SessionTranscript:
    return SessionTranscript("p", "s", main, {f"subagents/agent-{k}": v for k, v in subs.items()})


def test_a_worker_that_never_finished_is_cut_short_with_its_calls_in_order() -> None:
    main = [assistant(("d1", "Agent", TASK))]  # its call never got a result
    cut_worker = worker(
        "a1",
        meta("d1"),
        assistant(("w1", "Write", {"file_path": "/ws/calc.py", "content": "x"})),
        result("w1", "written"),
        assistant(("b1", "Bash", {"command": "false"})),
        result("b1", "exit 1", error=True),
        assistant(("b2", "Bash", {"command": "sleep 9"})),  # in flight at the kill
    )
    [cut] = cut_short(transcript(main, a1=cut_worker))
    assert (cut.tool_use_id, cut.agent_id, cut.agent_type) == ("d1", "a1", "coder")
    assert (cut.description, cut.prompt, cut.cwd) == ("write calc", "write calc.py", "/ws")
    assert cut.calls == (
        Call("Write", {"file_path": "/ws/calc.py", "content": "x"}, "written"),
        Call("Bash", {"command": "false"}, "exit 1", failed=True),
        Call("Bash", {"command": "sleep 9"}, None),
    )


def test_a_finished_worker_and_one_handed_on_already_are_not() -> None:
    main = [
        assistant(("d1", "Agent", TASK)),
        result("d1", "report"),
        assistant(("d2", "Agent", TASK)),
        {"type": "user", "message": {"content": "[flower: worker a2 was cut short ...]"}},
        assistant(("d3", "Agent", TASK)),  # the worker shown a2's list
        result("d3", "report"),
    ]
    done = worker("a1", meta("d1"), meta("d1", finished=True))
    handed = worker("a2", meta("d2"), assistant(("w", "Write", {})))
    shown = worker("a3", meta("d3"), meta("d3", finished=True))
    assert cut_short(transcript(main, a1=done, a2=handed, a3=shown)) == []


def test_a_finished_worker_whose_report_never_arrived_is() -> None:
    main = [assistant(("d1", "Agent", TASK))]  # the kill came before its result was stored
    done = worker("a1", meta("d1"), assistant(("w", "Write", {})), meta("d1", finished=True))
    [cut] = cut_short(transcript(main, a1=done))
    assert cut.agent_id == "a1" and cut.calls == (Call("Write", {}, None),)


def test_several_cut_workers_come_in_the_order_they_were_started() -> None:
    main = [assistant(("d1", "Agent", TASK), ("d2", "Agent", TASK))]
    found = cut_short(transcript(main, b=worker("b", meta("d2")), a=worker("a", meta("d1"))))
    assert [cut.tool_use_id for cut in found] == ["d1", "d2"]
    assert all(cut.calls == () for cut in found)


def test_a_worker_noted_but_never_shown_to_a_worker_is_handed_on_again_noted() -> None:
    """The continuation that told the coordinator was killed before its next worker started:
    the cut worker is still to be shown to a worker (the session is not told twice)."""
    note = {"type": "user", "message": {"content": "[flower: worker a1 was cut short ...]"}}
    main = [assistant(("d1", "Agent", TASK)), note, assistant(("d2", "Agent", TASK))]
    cut_worker = worker("a1", meta("d1"), assistant(("w", "Write", {})), result("w", "ok"))
    [cut] = cut_short(transcript(main, a1=cut_worker))  # d2's worker never started
    assert (cut.agent_id, cut.noted) == ("a1", True)
    assert cut.calls == (Call("Write", {}, "ok"),)


def test_a_worker_started_before_the_note_did_not_get_the_list() -> None:
    note = {"type": "user", "message": [{"type": "text", "text": "worker a1 was cut short"}]}
    main = [
        assistant(("d1", "Agent", TASK)),
        assistant(("d0", "Agent", TASK)),
        result("d0", "report"),
        note,
    ]
    earlier = worker("a0", meta("d0"), meta("d0", finished=True))
    cut_worker = worker("a1", meta("d1"), assistant(("w", "Write", {})))
    [cut] = cut_short(transcript(main, a0=earlier, a1=cut_worker))
    assert cut.agent_id == "a1"


def test_a_result_the_store_made_up_on_a_resume_leaves_the_call_in_doubt() -> None:
    """An earlier resume healed the in-flight call (flower.stores.prune): that result says
    the call was cut, not what it did, so the call is still shown as "may have run"."""
    main = [assistant(("d1", "Agent", TASK))]
    calls = worker("a1", meta("d1"), assistant(("b", "Bash", {"command": "sleep 9"})))
    healed = heal_orphans(calls, text="[cut: redo it if needed]")
    assert len(healed) == len(calls) + 1  # it was healed
    [cut] = cut_short(transcript(main, a1=healed))
    assert cut.calls == (Call("Bash", {"command": "sleep 9"}, None),)
