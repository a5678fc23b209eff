"""Guards: every decision as a plain call, then the adapter's output format and the assembly."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AgentDefinition, HookMatcher

from flower.core import guard
from flower.core.guard import (
    BULKY,
    HANDS_ON,
    SPILL_PREVIEW_CHARS,
    decide_delegate,
    decide_isolate,
    decide_spill,
    decide_whitelist,
    delegate_guard,
    index_guard,
    is_main_thread,
    isolate_guard,
    isolated,
    merge_hooks,
    refresh_index,
    spill_guard,
    spill_output,
    wants_isolation,
    whitelist_guard,
    workbench_hooks,
)
from flower.core.hooks import Deny, Halt, Replace, Rewrite, as_matcher, hook_output
from flower.core.workbench import Workbench
from flower.stores import ephemeral
from tests.stores.test_ephemeral import EPHEMERAL, NOT_EPHEMERAL

MAIN: dict[str, Any] = {"session_id": "s", "cwd": "/w", "hook_event_name": "PreToolUse"}
SUB: dict[str, Any] = {**MAIN, "agent_id": "a6e78490e2f0704c0", "agent_type": "worker"}
HANDS = HANDS_ON.split("|")


async def _call(hook: HookMatcher, data: dict[str, Any]) -> Any:
    """Run the matcher's one callback as the SDK does; the result as a plain dict."""
    return await hook.hooks[0](data, "toolu_1", {"signal": None})  # type: ignore[arg-type]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def wb(tmp_path: Path) -> Workbench:
    return Workbench(tmp_path / "ws")


def test_main_thread_is_the_absence_of_agent_id() -> None:
    assert is_main_thread(MAIN)
    assert is_main_thread({**MAIN, "agent_type": "worker"})  # --agent sessions: type, no id
    assert is_main_thread({**MAIN, "agent_id": ""})
    assert not is_main_thread(SUB)


# -- whitelist --------------------------------------------------------------------------


@pytest.mark.parametrize("tool", HANDS)
def test_whitelist_denies_each_banned_tool_on_the_main_thread(tool: str) -> None:
    denial = decide_whitelist(tool, {}, MAIN, banned=HANDS, role="判官")
    assert denial is not None
    assert denial.reason.startswith(f"判官没有 {tool} 工具。这是有意的设计")
    assert "写在回复正文里" in denial.reason
    assert decide_whitelist(tool, {}, SUB, banned=HANDS, role="判官") is None


def test_whitelist_lets_unbanned_tools_through() -> None:
    assert decide_whitelist("Bash", {}, MAIN, banned=["Write"], role="r") is None
    assert decide_whitelist("Read", {}, MAIN, banned=HANDS, role="r") is None
    # the main thread's only: a subagent's tools are its definition's (000:642)
    assert decide_whitelist("Write", {}, SUB, banned=HANDS, role="r") is None


@pytest.mark.parametrize(
    ("allowed", "matcher"),
    [
        (None, HANDS_ON),
        ([], HANDS_ON),
        (["Read", "Glob", "Grep"], HANDS_ON),
        (["Read", "Bash"], "Write|Edit|NotebookEdit"),
        (["Write", "Edit"], "Bash|NotebookEdit"),
    ],
)
def test_whitelist_guard_matches_the_hands_on_tools_not_allowed(
    allowed: list[str] | None, matcher: str
) -> None:
    hook = whitelist_guard(allowed)
    assert hook is not None
    assert hook.matcher == matcher
    assert len(hook.hooks) == 1


def test_whitelist_guard_is_none_when_nothing_is_banned() -> None:
    assert whitelist_guard(["Read", *HANDS]) is None


@pytest.mark.anyio
async def test_whitelist_guard_uses_the_default_role() -> None:
    hook = whitelist_guard(["Read"])
    assert hook is not None
    out = await _call(hook, {**MAIN, "tool_name": "Write", "tool_input": {}})
    assert "这个角色没有 Write 工具" in out["hookSpecificOutput"]["permissionDecisionReason"]


# -- delegate ---------------------------------------------------------------------------


def _delegate(
    tool: str, tool_input: dict[str, Any], hook_input: dict[str, Any], *, glance: bool
) -> Deny | None:
    return decide_delegate(
        tool, tool_input, hook_input, tools=HANDS, allow_glance=glance, artifacts="/wb/artifacts/"
    )


@pytest.mark.parametrize("tool", HANDS)
def test_delegate_denies_each_hands_on_tool_on_the_main_thread(tool: str) -> None:
    denial = _delegate(tool, {"command": "ls"}, MAIN, glance=False)
    assert denial is not None
    for words in (tool, "Agent 工具", "目标和验收标准", "/wb/artifacts/", "只回报路径和结论"):
        assert words in denial.reason


@pytest.mark.parametrize("tool", HANDS)
def test_delegate_lets_subagents_through_with_an_explicit_allow(tool: str) -> None:
    """Unattended, nobody approves a worker's call: the allow grants it, input unchanged."""
    decision = _delegate(tool, {"command": "make test"}, SUB, glance=False)
    assert isinstance(decision, Rewrite) and decision.tool_input == {"command": "make test"}


@pytest.mark.parametrize("tool", ["Read", "Agent", "Glob", "WebFetch"])
def test_delegate_ignores_tools_that_are_not_hands_on(tool: str) -> None:
    assert _delegate(tool, {}, MAIN, glance=False) is None


def test_glance_lets_an_ephemeral_bash_command_through() -> None:
    assert _delegate("Bash", {"command": "git status && ls"}, MAIN, glance=True) is None
    assert _delegate("Bash", {"command": "git status && ls"}, MAIN, glance=False) is not None


def test_glance_still_refuses_writes_and_says_what_passes() -> None:
    denial = _delegate("Bash", {"command": "rm x"}, MAIN, glance=True)
    assert denial is not None
    assert "git status" in denial.reason
    assert _delegate("Bash", {}, MAIN, glance=True) is not None
    write = _delegate("Write", {"command": "ls"}, MAIN, glance=True)
    assert write is not None and "git status" not in write.reason


def test_glance_uses_the_stores_is_ephemeral_itself() -> None:
    # One function decides both what the coordinator may glance at and what later expires:
    # the guard imports it, and lets through exactly the commands it accepts.
    assert vars(guard)["is_ephemeral"] is ephemeral.is_ephemeral
    for cmd in [*EPHEMERAL, *NOT_EPHEMERAL]:
        glanced = _delegate("Bash", {"command": cmd}, MAIN, glance=True) is None
        assert glanced == ephemeral.is_ephemeral(cmd), cmd


@pytest.mark.anyio
async def test_delegate_guard_names_the_real_artifacts_folder(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "ws", home=tmp_path / "outside")
    hook = delegate_guard(workbench=wb)
    assert hook.matcher == HANDS_ON
    out = await _call(hook, {**MAIN, "tool_name": "Edit", "tool_input": {}})
    assert f"{wb.artifacts}/" in out["hookSpecificOutput"]["permissionDecisionReason"]
    plain = await _call(
        delegate_guard(tools="Bash"), {**MAIN, "tool_name": "Bash", "tool_input": {}}
    )
    assert "工作台的 artifacts/" in plain["hookSpecificOutput"]["permissionDecisionReason"]


# -- spill ------------------------------------------------------------------------------


def _spilled_name(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16] + ".txt"


def test_short_output_is_left_alone(wb: Workbench) -> None:
    assert spill_output({"stdout": "x" * 100, "stderr": ""}, wb, 100) is None
    assert spill_output("x" * 100, wb, 100) is None
    assert spill_output(None, wb, 10) is None
    assert spill_output(12345, wb, 1) is None


def test_long_string_field_becomes_pointer_plus_preview(wb: Workbench) -> None:
    text = "".join(f"line {n}\n" for n in range(2000))
    bash = {"stdout": text, "stderr": "", "interrupted": False, "isImage": False}
    out = spill_output(bash, wb, 4000)
    assert out is not None
    assert out["stderr"] == "" and out["interrupted"] is False and out["isImage"] is False
    pointer, preview = out["stdout"].split("\n", 1)
    path = wb.spill / _spilled_name(text)
    assert str(path) in pointer and f"{len(text)} 字符" in pointer and "Read" in pointer
    assert preview == text[:SPILL_PREVIEW_CHARS]
    assert path.read_text(encoding="utf-8") == text
    assert bash["stdout"] == text  # the tool's own dict is not mutated


def test_threshold_is_exclusive(wb: Workbench) -> None:
    assert spill_output({"stdout": "x" * 500}, wb, 500) is None
    assert spill_output({"stdout": "x" * 501}, wb, 500) is not None


def test_text_within_the_preview_is_never_spilled(wb: Workbench) -> None:
    assert spill_output("x" * SPILL_PREVIEW_CHARS, wb, 10) is None
    assert spill_output("x" * (SPILL_PREVIEW_CHARS + 1), wb, 10) is not None


def test_lists_are_never_entered(wb: Workbench) -> None:
    blocks = [{"type": "text", "text": "x" * 10_000}, {"type": "image", "source": {}}]
    assert spill_output({"content": blocks}, wb, 100) is None
    assert spill_output(blocks, wb, 100) is None


def test_nested_dict_is_spilled_in_place(wb: Workbench) -> None:
    read = {
        "type": "text",
        "file": {"filePath": "/w/big.log", "content": "y" * 5000, "numLines": 1},
    }
    out = spill_output(read, wb, 4000)
    assert out is not None
    assert out["type"] == "text"
    assert out["file"]["filePath"] == "/w/big.log" and out["file"]["numLines"] == 1
    assert out["file"]["content"].startswith("[输出过长（5000 字符）")


def test_plain_string_output_is_spilled_as_a_string(wb: Workbench) -> None:
    out = spill_output("z" * 5000, wb, 4000)
    assert isinstance(out, str) and out.startswith("[输出过长") and out.endswith("z" * 400)


def test_binary_output_does_not_crash(wb: Workbench) -> None:
    text = "\udcff\udcfe\x00" * 3000 + "\ud800"
    out = spill_output({"stdout": text}, wb, 4000)
    assert out is not None
    files = list(wb.spill.iterdir())
    assert len(files) == 1
    assert files[0].read_bytes() == text.encode("utf-8", "surrogatepass")


def _post(tool: str, tool_input: dict[str, Any], response: Any, **extra: Any) -> dict[str, Any]:
    return {
        **MAIN,
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_response": response,
        **extra,
    }


def test_reading_a_spill_file_is_never_spilled_again(wb: Workbench) -> None:
    text = "q" * 9000
    path = wb.spill_text(text)
    response = {"type": "text", "file": {"filePath": str(path), "content": text}}
    read = {"file_path": str(path)}
    assert (
        decide_spill(
            "Read",
            read,
            _post("Read", read, response),
            workbench=wb,
            threshold=4000,
            main_only=False,
        )
        is None
    )
    other = {"file_path": str(wb.workspace / "big.txt")}
    decision = decide_spill(
        "Read", other, _post("Read", other, response), workbench=wb, threshold=4000, main_only=False
    )
    assert isinstance(decision, Replace)


def test_main_only_spares_subagents(wb: Workbench) -> None:
    cmd = {"command": "cat big"}
    response = {"stdout": "w" * 5000, "stderr": ""}
    sub = _post("Bash", cmd, response, agent_id="a1")
    assert decide_spill("Bash", cmd, sub, workbench=wb, threshold=4000, main_only=True) is None
    assert decide_spill("Bash", cmd, sub, workbench=wb, threshold=4000, main_only=False)
    main = _post("Bash", cmd, response)
    assert decide_spill("Bash", cmd, main, workbench=wb, threshold=4000, main_only=True)


def test_spill_guard_matches_the_bulky_tools(wb: Workbench) -> None:
    assert spill_guard(wb).matcher == BULKY
    assert spill_guard(wb, tools="Bash").matcher == "Bash"


# -- index ------------------------------------------------------------------------------


def test_a_write_under_the_workbench_refreshes_the_index(wb: Workbench) -> None:
    script = wb.scripts / "fetch.py"
    script.write_text("# desc: fetch things\n")
    refresh_index("Write", {"file_path": str(script)}, MAIN, workbench=wb)
    assert "fetch things" in wb.index.read_text(encoding="utf-8")


def test_a_relative_path_is_resolved_against_the_hooks_cwd(wb: Workbench) -> None:
    (wb.notes / "n.md").write_text("n")
    refresh_index(
        "Write", {"file_path": ".flower/notes/n.md"}, {"cwd": str(wb.workspace)}, workbench=wb
    )
    assert "n.md" in wb.index.read_text(encoding="utf-8")


def test_a_write_elsewhere_leaves_the_index_alone(wb: Workbench) -> None:
    before = wb.index.read_text(encoding="utf-8")
    (wb.notes / "n.md").write_text("n")
    for tool_input in ({"file_path": str(wb.workspace / "src.py")}, {}, {"file_path": 3}):
        refresh_index("Edit", tool_input, MAIN, workbench=wb)
    assert wb.index.read_text(encoding="utf-8") == before


@pytest.mark.anyio
async def test_index_guard_has_no_opinion(wb: Workbench) -> None:
    hook = index_guard(wb)
    assert hook.matcher == "Write|Edit"
    data = _post("Write", {"file_path": str(wb.notes / "x.md")}, {"type": "create"})
    assert await _call(hook, data) == {}


# -- isolation --------------------------------------------------------------------------


def _agents() -> dict[str, AgentDefinition]:
    return {
        "coder": isolated(AgentDefinition(description="writes code", prompt="p")),
        "reader": AgentDefinition(description="reads", prompt="p"),
    }


def test_marked_role_gets_a_worktree_with_the_full_input() -> None:
    call = {
        "description": "fix it",
        "prompt": "do X",
        "subagent_type": "coder",
        "run_in_background": False,
    }
    decision = decide_isolate("Agent", call, MAIN, agents=_agents())
    assert decision == Rewrite({**call, "isolation": "worktree"})
    assert "isolation" not in call


@pytest.mark.parametrize(
    "call",
    [
        {"prompt": "p", "subagent_type": "reader"},
        {"prompt": "p", "subagent_type": "stranger"},
        {"prompt": "p"},
        {"prompt": "p", "subagent_type": "coder", "isolation": "remote"},
        {"prompt": "p", "subagent_type": "coder", "isolation": "worktree"},
        {"prompt": "p", "subagent_type": "coder", "cwd": "/elsewhere"},
    ],
)
def test_unmarked_roles_and_the_models_own_choice_are_left_alone(call: dict[str, Any]) -> None:
    assert decide_isolate("Agent", call, MAIN, agents=_agents()) is None


def test_isolation_none_counts_as_unset() -> None:
    call = {"prompt": "p", "subagent_type": "coder", "isolation": None}
    assert decide_isolate("Agent", call, MAIN, agents=_agents()) == Rewrite(
        {**call, "isolation": "worktree"}
    )


def test_only_the_agent_tool_is_isolated() -> None:
    assert decide_isolate("Bash", {"subagent_type": "coder"}, MAIN, agents=_agents()) is None


@pytest.mark.anyio
async def test_isolate_guard_reports_each_injection() -> None:
    injected: list[str] = []
    hook = isolate_guard(_agents(), on_inject=injected.append)
    assert hook.matcher == "Agent"
    call = {"prompt": "p", "subagent_type": "coder"}
    out = await _call(hook, {**MAIN, "tool_name": "Agent", "tool_input": call})
    assert out["hookSpecificOutput"]["updatedInput"]["isolation"] == "worktree"
    reader = {"prompt": "p", "subagent_type": "reader"}
    assert await _call(hook, {**MAIN, "tool_name": "Agent", "tool_input": reader}) == {}
    assert injected == ["coder"]


def test_the_mark_never_reaches_the_cli() -> None:
    agent = AgentDefinition(description="d", prompt="p")
    assert isolated(agent) is agent
    assert wants_isolation(agent)
    assert "_flower_isolate" not in dataclasses.asdict(agent)
    assert dataclasses.asdict(agent) == dataclasses.asdict(
        AgentDefinition(description="d", prompt="p")
    )


def test_the_mark_is_lost_by_dataclasses_replace() -> None:
    # Documented cost of a non-field mark: a replaced copy is silently unisolated.
    agent = isolated(AgentDefinition(description="d", prompt="p"))
    assert not wants_isolation(dataclasses.replace(agent, model="haiku"))


def test_the_mark_can_be_cleared_and_none_is_unmarked() -> None:
    agent = isolated(AgentDefinition(description="d", prompt="p"))
    assert not wants_isolation(isolated(agent, False))
    assert not wants_isolation(None)


# -- the adapter ------------------------------------------------------------------------


def test_hook_output_speaks_the_sdk_format() -> None:
    assert hook_output(None) == {}
    assert hook_output(Deny("no")) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }
    assert hook_output(Rewrite({"a": 1})) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"a": 1},
        }
    }
    assert hook_output(Replace({"stdout": "x"})) == {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": {"stdout": "x"}}
    }
    # the SDK renames continue_ to the CLI's "continue" (sdk-facts §3)
    assert hook_output(Halt("handoff")) == {"continue_": False, "stopReason": "handoff"}


@pytest.mark.anyio
async def test_as_matcher_hands_the_guard_tool_input_and_hook_input() -> None:
    seen: list[tuple[str, dict[str, Any], Any]] = []

    def spy(tool: str, tool_input: dict[str, Any], hook_input: Any) -> Deny:
        seen.append((tool, tool_input, hook_input))
        return Deny("stop")

    hook = as_matcher("Bash|Write", spy)
    assert isinstance(hook, HookMatcher) and hook.matcher == "Bash|Write"
    data = {**MAIN, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    out = await _call(hook, data)
    assert out == hook_output(Deny("stop"))
    await _call(hook, {**MAIN, "tool_input": None})
    assert seen == [("Bash", {"command": "ls"}, data), ("", {}, {**MAIN, "tool_input": None})]


# -- assembly ---------------------------------------------------------------------------


def _shape(hooks: dict[str, list[HookMatcher]]) -> dict[str, list[str | None]]:
    return {event: [m.matcher for m in matchers] for event, matchers in hooks.items()}


def test_workbench_hooks_default(wb: Workbench) -> None:
    assert _shape(workbench_hooks(wb)) == {
        "PreToolUse": [HANDS_ON],
        "PostToolUse": ["Write|Edit", BULKY],
    }


def test_workbench_hooks_without_delegation_or_spill_drop_empty_events(wb: Workbench) -> None:
    hooks = workbench_hooks(wb, delegate_only=False, spill_threshold=None)
    assert _shape(hooks) == {"PostToolUse": ["Write|Edit"]}
    assert _shape(workbench_hooks(wb, delegate_only=False, spill_threshold=0)) == _shape(hooks)


def test_workbench_hooks_add_isolation_only_for_marked_agents(wb: Workbench) -> None:
    plain = {"reader": AgentDefinition(description="d", prompt="p")}
    assert _shape(workbench_hooks(wb, agents=plain))["PreToolUse"] == [HANDS_ON]
    assert _shape(workbench_hooks(wb, agents=_agents()))["PreToolUse"] == [HANDS_ON, "Agent"]
    only_isolate = workbench_hooks(wb, delegate_only=False, agents=_agents())
    assert _shape(only_isolate)["PreToolUse"] == ["Agent"]


@pytest.mark.anyio
async def test_workbench_hooks_pass_glance_and_threshold_through(wb: Workbench) -> None:
    hooks = workbench_hooks(wb, allow_glance=True, spill_threshold=500)
    delegate, spill = hooks["PreToolUse"][0], hooks["PostToolUse"][1]
    glance = {**MAIN, "tool_name": "Bash", "tool_input": {"command": "git status"}}
    assert await _call(delegate, glance) == {}
    data = _post("Bash", {"command": "x"}, {"stdout": "s" * 501})
    out = await _call(spill, data)
    assert out["hookSpecificOutput"]["updatedToolOutput"]["stdout"].startswith("[输出过长")


def test_merge_hooks_extends_without_dedupe_and_skips_none() -> None:
    a, b, c = HookMatcher("A"), HookMatcher("B"), HookMatcher("C")
    merged = merge_hooks({"PreToolUse": [a]}, None, {"PreToolUse": [a, b], "Stop": [c]}, {})
    assert merged == {"PreToolUse": [a, a, b], "Stop": [c]}
    assert merge_hooks() == {} and merge_hooks(None) == {}


def test_merge_hooks_does_not_alias_its_inputs() -> None:
    group = {"PreToolUse": [HookMatcher("A")]}
    merge_hooks(group)["PreToolUse"].append(HookMatcher("B"))
    assert len(group["PreToolUse"]) == 1
