"""A worker cut short by the coordinator's handoff is handed on, not redone (issue 30, item 3).

The coordinator sends a worker to the background and keeps working; the worker writes
hello.py, runs it, and starts a slow Bash; then the coordinator's context fills (usage near
the window), flower stops its session and has it write a handoff, which cuts the worker
short. The new generation, a brand-new session, is told what the cut worker did (from the
retired session's transcript in the store), and the worker it starts is shown the same
list (the slow call marked "may have run"), checks the disk and reports instead of writing
and running everything again. Asserted on what the fake API was sent, in either language.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.core.lang import current
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.testing import (
    Always,
    FakeAPI,
    Reply,
    Request,
    Usage,
    When,
    rules,
    text,
    tool,
)
from flower.testing.demo import DEMO_ASK, GOAL_MARKERS, ROLE_MARKERS, starter_cast, verdict_reply
from tests.cli.conftest import flower
from tests.cli.hello_worker import MAY_HAVE_RUN, hello_worker, sleeper_killed
from tests.json_contract import parse_document

NEAR_WINDOW = 960_000  # past the default handoff level (a 1M window less 50k of headroom)
TABLES = {"en": EN, "zh": ZH}
HANDOFF_ASKED = tuple(table["handoff.write"].split("{", 1)[0][:30] for table in (EN, ZH))
NEW_GENERATION = tuple(
    table["handoff.resume"].split("{whose}", 1)[1].split("\n", 1)[0] for table in (EN, ZH)
)
"""What the new generation's first prompt says (en, zh)."""
HANDED_ON = tuple(table["cut.handoff_worker"].split("(", 1)[0] for table in (EN, ZH))
"""What the next worker is shown first starts with (en, zh)."""
TOLD = tuple(table["cut.handoff_coordinator"].split("{", 1)[0] for table in (EN, ZH))
"""What the new generation's note starts with (en, zh)."""


def handoff_reply() -> Reply:
    titles = ("正在做", "下一步") if current() == "zh" else ("Doing", "Next")
    doing, next_ = "hello.py delegated to a background worker", "wait for its report"
    return text(f"## {titles[0]}\n{doing}\n\n## {titles[1]}\n{next_}")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_worker_cut_by_a_handoff_is_handed_on_to_the_new_generation(
    lang: str,
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWER_LANG", lang)  # the fake model's lines, here
    cli_env = {**cli_env, "FLOWER_LANG": lang}  # flower's, there
    pidfile = workspace.parent / "sleeper.pid"
    workers: list[str] = []
    cast = starter_cast()

    worker = hello_worker(
        workers,
        handed_on=lambda request: any(request.contains(marker) for marker in HANDED_ON),
        slow=lambda: pidfile,
    )

    def coordinator(request: Request) -> Reply:
        """The first generation sends a worker to the background and waits, its context
        filling once the worker is mid-task; the next one delegates in the foreground."""
        delegated = any(u.get("name") == "Agent" for u in request.tool_uses())
        task = {"description": "hello.py", "prompt": "Write hello.py and run it."}
        if any(request.contains(marker) for marker in NEW_GENERATION):
            # it may start with the old session's first exchange (the background delegation)
            again = any(u.get("id") == "delegate_again" for u in request.tool_uses())
            if not again:
                call = {**task, "subagent_type": "coder", "run_in_background": False}
                return tool("Agent", call, id="delegate_again")
            return text("done")
        if not delegated:
            call = {**task, "subagent_type": "coder", "run_in_background": True}
            return tool("Agent", call, id="delegate_background")
        waiting = tool("Bash", {"command": "sleep 0"}, id=f"wait_{request.index}")
        if not pidfile.is_file():  # the worker has not reached its slow call yet
            return Reply(blocks=waiting.blocks, delay=0.3)
        return Reply(blocks=waiting.blocks, usage=Usage(input_tokens=NEAR_WINDOW))

    def judge(request: Request) -> Reply:
        word = ("achieved", "达成")[lang == "zh"]
        return verdict_reply(word)

    cast_rules = [
        (When(kind="main", last_user_contains=m), Always(handoff_reply())) for m in HANDOFF_ASKED
    ]
    for i in range(2):
        cast_rules += [
            (
                When(
                    kind="main", system_contains=ROLE_MARKERS["judge"][i], contains=GOAL_MARKERS[i]
                ),
                cast,
            ),
            (When(kind="main", system_contains=ROLE_MARKERS["judge"][i]), judge),
            (When(kind="main", system_contains=ROLE_MARKERS["coordinator"][i]), coordinator),
        ]
    fake_api.script = rules((When(kind="subagent"), worker), *cast_rules, (When(), cast))
    with sleeper_killed(pidfile):
        done = flower(
            DEMO_ASK,
            "--timeout",
            "0",
            "--json",
            "-w",
            str(workspace),
            env=cli_env,
            cwd=workspace.parent,
        )
    assert done.returncode == 0, done.stderr
    assert parse_document(done.stdout)["status"] == "achieved"
    assert len(workers) >= 2, "the new generation started no worker"
    cut, fresh = workers[0], workers[1]
    requests = fake_api.requests
    # the new generation is told which worker the handoff cut short and what it did
    first_new = next(
        r for r in requests if r.kind == "main" and any(r.contains(m) for m in NEW_GENERATION)
    )
    i = ("en", "zh").index(lang)
    assert first_new.contains(TOLD[i]) and first_new.contains(cut)
    # the next worker is shown the cut one's calls and results, the open call flagged
    shown = [r for r in requests if r.agent_id == fresh]
    assert shown[0].contains(HANDED_ON[i])
    assert shown[0].contains("hello.py") and shown[0].contains("python3 hello.py")
    # The slow call, in flight at the cut, is flagged "may have run" wherever it is listed:
    # whether its call reached the store before the cut is the mirror's timing, not flower's.
    if shown[0].contains("echo $$ >"):
        assert any(shown[0].contains(said) for said in MAY_HAVE_RUN), "the open call unflagged"
    # ... and redoes none of it: no Write, no run of hello.py, no slow call again
    assert [u["name"] for u in shown[-1].tool_uses()] == ["Read"]
    assert len(workers) == 2
