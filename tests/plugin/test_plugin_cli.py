"""The plugin on the real CLI (against the fake API): loaded, offered, invoked, and switched off.

What is asserted is what the CLI reported (its init message) and what the model was shown
(the recorded requests): the skill listing in the system context, the skill's instructions
after a Skill call, a subagent's preloaded skill, and what portable=False adds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import SystemMessage, query

from flower.core.agent import PLUGIN_DIR, AgentSpec, build_options
from flower.core.events import Event
from flower.core.roles import worker
from flower.core.runtime import Runtime
from flower.testing import Always, FakeAPI, Request, ToolUse, When, rules, sequence, text, tool
from flower.testing.request import block_text
from tests.plugin.files import agents, manifest, skill, skills

pytestmark = pytest.mark.anyio


@pytest.fixture
def runtimes(flower_env: FakeAPI, workspace: Path) -> Iterator[Any]:
    made: list[Runtime] = []

    def make(**kwargs: Any) -> Runtime:
        run_dir = workspace.parent / f"runs{len(made)}"
        made.append(Runtime(workspace=workspace, run_dir=run_dir, **kwargs))
        return made[-1]

    yield make
    for runtime in made:
        runtime.close()


def listed(request: Request) -> dict[str, bool]:
    """Which of the plugin's skills and agents the model was offered, by name."""
    return {
        page.name: f"- flower:{page.name}: {page.description}" in request.system_text
        for page in [*skills(), *agents()]
    }


def ours(plugins: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in plugins if p.get("name") == "flower"]


async def test_a_step_loads_the_plugin_and_the_model_is_offered_its_skills_and_agent(
    flower_env: FakeAPI, runtimes: Any
) -> None:
    flower_env.script = sequence(text("done"))
    events: list[Event] = []
    result = await runtimes().run(AgentSpec("t", ""), "hi", on_event=events.append)
    assert result.ok
    [session] = [e for e in events if e.kind == "session"]
    assert ours(session.payload["plugins"]) == [
        {
            "name": "flower",
            "path": str(PLUGIN_DIR),
            "source": "flower@inline",
            "version": manifest()["version"],
        }
    ]
    [request] = flower_env.main_requests()
    assert all(listed(request).values()), listed(request)
    assert "Skill" in request.tool_names  # the listing is for this tool


async def test_invoking_each_skill_shows_the_model_its_instructions(
    flower_env: FakeAPI, runtimes: Any
) -> None:
    calls = {page.name: tool("Skill", {"skill": f"flower:{page.name}"}) for page in skills()}
    flower_env.script = sequence(*calls.values(), text("done"))
    result = await runtimes().run(AgentSpec("t", ""), "work")
    assert result.ok and result.text == "done"
    last = flower_env.main_requests()[-1]
    for name, call in calls.items():
        [block] = call.blocks
        assert isinstance(block, ToolUse)
        shown = last.result_for(block.id)
        assert shown is not None and not shown.is_error
        assert shown.text == f"Launching skill: flower:{name}"
        # The instructions come in the same user message as the tool result.
        [message] = [m for m in last.messages if m.get("role") == "user" and block.id in str(m)]
        assert skill(name).body.strip() in block_text(message["content"]), name


async def run_once(options: Any, env: dict[str, str]) -> list[dict[str, Any]]:
    """One prompt on the CLI with these options; the plugins its init message listed."""
    options.env = {**options.env, **env}
    plugins: list[dict[str, Any]] = []
    async for message in query(prompt="hi", options=options):
        if isinstance(message, SystemMessage) and message.subtype == "init":
            plugins = message.data["plugins"]
    return plugins


async def test_use_plugin_false_leaves_the_plugin_out_of_the_session(
    fake_api: FakeAPI, claude_env: dict[str, str], workspace: Path
) -> None:
    seen = {}
    for use_plugin in (True, False):
        fake_api.reset()
        fake_api.script = sequence(text("done"))
        options = build_options(AgentSpec("t", ""), cwd=workspace, use_plugin=use_plugin)
        plugins = await run_once(options, claude_env)
        [request] = fake_api.main_requests()
        seen[use_plugin] = (ours(plugins), listed(request), "flower:" in request.system_text)
    with_plugin, without = seen[True], seen[False]
    assert with_plugin[0] and all(with_plugin[1].values()) and with_plugin[2]
    assert without == ([], dict.fromkeys(without[1], False), False)


def write_skill(folder: Path, name: str, marker: str) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {marker}\n---\nbody of {name}\n", encoding="utf-8"
    )


async def test_portable_false_reads_the_projects_claude_dir_and_never_the_users(
    flower_env: FakeAPI, runtimes: Any, workspace: Path, claude_home: Path
) -> None:
    (workspace / "CLAUDE.md").write_text("PROJECT-MEMORY-7f3\n", encoding="utf-8")
    write_skill(workspace / ".claude" / "skills", "project-skill", "PROJECT-SKILL-7f3")
    (claude_home / ".claude").mkdir(exist_ok=True)
    (claude_home / ".claude" / "CLAUDE.md").write_text("USER-MEMORY-7f3\n", encoding="utf-8")
    write_skill(claude_home / ".claude" / "skills", "user-skill", "USER-SKILL-7f3")
    markers = ("PROJECT-MEMORY-7f3", "PROJECT-SKILL-7f3", "USER-MEMORY-7f3", "USER-SKILL-7f3")
    shown = {}
    for portable in (True, False):
        flower_env.reset()
        flower_env.script = sequence(text("done"))
        assert (await runtimes(portable=portable).run(AgentSpec("t", ""), "hi")).ok
        [request] = flower_env.main_requests()
        shown[portable] = {marker: request.contains(marker) for marker in markers}
        assert all(listed(request).values())  # the plugin is not a setting source: always in
    assert shown[True] == dict.fromkeys(markers, False)
    assert shown[False] == {
        "PROJECT-MEMORY-7f3": True,
        "PROJECT-SKILL-7f3": True,
        "USER-MEMORY-7f3": False,
        "USER-SKILL-7f3": False,
    }


def start(subagent_type: str) -> Any:
    return tool(
        "Agent",
        {
            "description": "delegate",
            "prompt": "do the work",
            "subagent_type": subagent_type,
            "run_in_background": False,
        },
    )


async def test_a_worker_gets_a_plugin_skill_preloaded(flower_env: FakeAPI, runtimes: Any) -> None:
    """Workers have no Skill tool; `worker(skills=[...])` hands them the text up front."""
    coder = worker("writes code", "Write the code.", tools=["Read"], skills=["flower:report-back"])
    flower_env.script = rules(
        (When(kind="subagent"), Always(text("report"))),
        (When(kind="main"), sequence(start("coder"), text("done"))),
    )
    spec = AgentSpec("lead", "", allowed_tools=["Agent", "Read"], agents={"coder": coder})
    assert (await runtimes().run(spec, "go")).ok
    [first, *_] = flower_env.subagent_requests()
    assert first.tool_names == ["Read"]
    assert "<command-name>flower:report-back</command-name>" in first.conversation_text
    assert skill("report-back").body.strip() in first.last_user_text


async def test_the_checker_agent_runs_with_its_own_prompt_and_tools(
    flower_env: FakeAPI, runtimes: Any
) -> None:
    [checker] = agents()
    flower_env.script = rules(
        (When(kind="subagent"), Always(text("all checks pass"))),
        (When(kind="main"), sequence(start("flower:checker"), text("done"))),
    )
    spec = AgentSpec("lead", "", allowed_tools=["Agent", "Read"])
    assert (await runtimes().run(spec, "go")).ok
    [first, *_] = flower_env.subagent_requests()
    assert sorted(first.tool_names) == ["Bash", "Read"]
    assert checker.body.strip() in first.system_text
    assert "all checks pass" in flower_env.main_requests()[-1].conversation_text
