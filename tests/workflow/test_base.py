"""Workflow.run on the real CLI: ctx flow, session wiring, gates, retries, failures, waking."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.core.agent import AgentSpec
from flower.core.events import Event
from flower.core.lineage import Lineage
from flower.core.runtime import Runtime, StepResult
from flower.testing import Always, FakeAPI, Reply, Request, When, rules, text
from flower.workflow import Ctx, RunState, Step, StepAbort, StepFailed, Workflow

pytestmark = pytest.mark.anyio

PLAIN = AgentSpec("plain", "")


@pytest.fixture
def make_runtime(flower_env: FakeAPI, workspace: Path) -> Iterator[Any]:
    made: list[Runtime] = []

    def make() -> Runtime:
        made.append(Runtime(workspace=workspace, run_dir=workspace.parent / "runs"))
        return made[-1]

    yield make
    for runtime in made:
        runtime.close()


def echo_prompt(request: Request) -> Reply:
    """Answer each new user prompt with a text naming it (so every step is told apart)."""
    return text(f"answer to: {request.prompt.strip()}")


async def test_ctx_flows_from_step_to_step_with_reduce(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    flower_env.script = echo_prompt
    steps = [
        Step("one", PLAIN, "first prompt"),
        Step(
            "two", PLAIN, lambda ctx: f"given <{ctx['one']}>", reduce=lambda r, ctx: r.text.upper()
        ),
        # rejected by its gate: no output in ctx, but its result is kept all the same (000:141)
        Step("three", PLAIN, "third", gate=lambda r, ctx: False, on_fail="continue"),
    ]
    runtime = make_runtime()
    ctx = await Workflow(steps).run(runtime)
    assert ctx["one"] == "answer to: first prompt"
    assert ctx["two"] == "ANSWER TO: GIVEN <ANSWER TO: FIRST PROMPT>"
    assert set(ctx["_results"]) == {"one", "two", "three"} and "three" not in ctx
    assert "_failed_at" not in ctx
    assert ctx["_runtime"] is runtime and runtime.on_session is None
    lineage = Lineage(runtime.run_dir, workspace)
    assert lineage.recall("one") == ctx["_sessions"]["one"] != ctx["_sessions"]["two"]


async def test_resume_from_continues_and_fork_copies(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = echo_prompt
    steps = [
        Step("one", PLAIN, "remember the word PLUM"),
        Step("two", PLAIN, "what word?", resume_from="one"),
        Step("three", PLAIN, "and again?", resume_from="one", fork=True),
    ]
    ctx = await Workflow(steps).run(make_runtime())
    sessions = ctx["_sessions"]
    assert sessions["two"] == sessions["one"]
    assert sessions["three"] not in (sessions["one"], None)
    for request in flower_env.main_requests()[1:]:
        assert request.contains("remember the word PLUM")  # the history came along


async def test_a_rejected_attempt_without_on_reject_starts_fresh(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = echo_prompt
    verdicts = iter([False, True])
    step = Step("work", PLAIN, "do it", retries=2, gate=lambda r, ctx: next(verdicts))
    runtime = make_runtime()
    ctx = await Workflow([step]).run(runtime)
    assert [r.step for r in runtime.results] == ["work", "work#retry1"]
    assert runtime.results[0].session_id != runtime.results[1].session_id
    assert ctx["_sessions"]["work"] == runtime.results[1].session_id
    assert flower_env.main_requests()[1].prompt == "do it"


async def test_on_reject_resumes_the_rejected_session_with_its_feedback(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = echo_prompt
    verdicts = iter([False, True])
    step = Step(
        "work",
        PLAIN,
        "do it",
        retries=2,
        gate=lambda r, ctx: next(verdicts),
        on_reject=lambda r, ctx: "not yet: the tests fail",
    )
    runtime = make_runtime()
    seen: list[Event] = []
    await Workflow([step]).run(runtime, on_event=seen.append)
    first, second = runtime.results
    assert second.step == "work#round2" and second.session_id == first.session_id
    assert flower_env.main_requests()[-1].prompt == "not yet: the tests fail"
    headers = [(e.text, e.payload) for e in seen if e.kind == "step"]  # each round announced
    one = {"index": 0, "total": 1, "resumed": False, "woke": 0, "round": 1, "rounds": 3}
    assert headers == [("work", one), ("work", {**one, "resumed": True, "round": 2})]


@pytest.mark.parametrize("feedback", ["", None])
async def test_on_reject_without_feedback_or_session_starts_fresh(
    flower_env: FakeAPI, make_runtime: Any, feedback: str | None
) -> None:
    flower_env.script = echo_prompt
    verdicts = iter([False, True])
    step = Step(
        "work",
        PLAIN,
        "do it",
        retries=1,
        gate=lambda r, ctx: next(verdicts),
        on_reject=lambda r, ctx: feedback or "",
    )
    runtime = make_runtime()
    await Workflow([step]).run(runtime)
    first, second = runtime.results
    assert second.step == "work#round2" and second.session_id != first.session_id


@pytest.mark.english
async def test_on_fail_stop_continue_raise(flower_env: FakeAPI, make_runtime: Any) -> None:
    flower_env.script = echo_prompt
    never = lambda r, ctx: False  # noqa: E731
    stop = Workflow([Step("a", PLAIN, "a", gate=never), Step("b", PLAIN, "b")])
    ctx = await stop.run(make_runtime())
    assert ctx["_failed_at"] == "a" and "b" not in ctx["_results"] and "a" not in ctx
    keep_going = Workflow(
        [Step("a", PLAIN, "a", gate=never, on_fail="continue"), Step("b", PLAIN, "b")]
    )
    ctx = await keep_going.run(make_runtime())
    assert "_failed_at" not in ctx and ctx["b"] == "answer to: b"
    with pytest.raises(StepFailed, match="step 'a' failed"):
        await Workflow([Step("a", PLAIN, "a", gate=never, on_fail="raise")]).run(make_runtime())


def test_an_unknown_on_fail_names_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="stop, continue, raise"):
        Step("a", PLAIN, "a", on_fail="retry")


async def test_step_abort_stops_retrying_at_once(flower_env: FakeAPI, make_runtime: Any) -> None:
    flower_env.script = echo_prompt

    def gate(result: StepResult, ctx: Ctx) -> bool:
        raise StepAbort("the goal cannot be judged here")

    runtime = make_runtime()
    ctx = await Workflow([Step("a", PLAIN, "a", retries=5, gate=gate)]).run(runtime)
    assert ctx["_aborted"] == "the goal cannot be judged here"
    assert ctx["_failed_at"] == "a" and len(runtime.results) == 1


async def test_when_skips_a_step_and_events_carry_the_step_payload(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = echo_prompt
    seen: list[Event] = []
    steps = [
        Step("a", PLAIN, "a"),
        Step("b", PLAIN, "b", when=lambda ctx: False),
        Step("c", PLAIN, "c"),
    ]
    done: list[str] = []
    ctx = await Workflow(steps).run(
        make_runtime(), on_event=seen.append, on_step=lambda step, result: done.append(step.name)
    )
    assert ctx["_skipped"] == ["b"] and done == ["a", "c"]
    headers = [e for e in seen if e.kind == "step"]
    assert [(e.text, e.payload) for e in headers] == [
        ("a", {"index": 0, "total": 3, "resumed": False, "woke": 0}),
        ("c", {"index": 2, "total": 3, "resumed": False, "woke": 0}),
    ]


async def test_the_same_step_object_runs_twice_unchanged(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = echo_prompt
    verdicts = iter([False, True, False, True])
    step = Step(
        "w",
        PLAIN,
        "go",
        retries=1,
        gate=lambda r, c: next(verdicts),
        on_reject=lambda r, c: "again",
    )
    flow = Workflow([step], continuous=False)
    first = await flow.run(make_runtime())
    second = await flow.run(make_runtime())
    assert step.prompt == "go" and step.resume_from is None and not step.fork
    assert first["w"] == second["w"] == "answer to: again"


async def test_a_second_run_wakes_the_step_with_its_resume_prompt(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = rules(
        (
            When(kind="main", last_user_contains="pick up where you left off"),
            Always(text("resumed")),
        ),
        (When(kind="main"), Always(text("did the long brief"))),
    )
    step = Step("work", PLAIN, "THE LONG BRIEF " * 20, resume_prompt="pick up where you left off")
    first = await Workflow([step]).run(make_runtime())
    seen: list[Event] = []
    second = await Workflow([step]).run(make_runtime(), on_event=seen.append)
    assert second["_woke"] == ["work"] and second["work"] == "resumed"
    assert second["_sessions"]["work"] == first["_sessions"]["work"]
    last = flower_env.main_requests()[-1]
    assert last.prompt == "pick up where you left off"
    assert last.contains("THE LONG BRIEF")  # the session's history, not a resend
    [header] = [e for e in seen if e.kind == "step"]
    assert header.payload["woke"] == 1 and header.payload["resumed"] is True


async def test_manifest_has_a_row_per_attempt_with_its_label(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = echo_prompt
    verdicts = iter([False, True])
    runtime = make_runtime()
    await Workflow([Step("w", PLAIN, "go", retries=1, gate=lambda r, c: next(verdicts))]).run(
        runtime
    )
    rows = json.loads(runtime.manifest_path.read_text())
    assert [r["step"] for r in rows] == ["w", "w#retry1"]


async def test_execute_returns_the_typed_state_and_gates_reach_it(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    """The run's state is a RunState; the seeds' `_` keys in ctx are copies of it."""
    flower_env.script = echo_prompt
    seen: list[RunState | None] = []

    def gate(result: StepResult, ctx: Ctx) -> bool:
        seen.append(RunState.current())
        ctx["_failed_at"] = "a write here steers nothing"
        raise StepAbort("cannot be judged")

    runtime = make_runtime()
    flow = Workflow([Step("a", PLAIN, "a", gate=gate), Step("b", PLAIN, "b")])
    state = await flow.execute(runtime)
    assert seen == [state] and RunState.current() is None  # set for the run only
    assert (state.aborted, state.failed_at) == ("cannot be judged", "a")
    assert state.runtime is runtime and list(state.results) == ["a"]
    assert state.ctx["_aborted"] == "cannot be judged" and state.ctx["_failed_at"] == "a"
    assert state.ctx["_results"] is state.results and state.ctx["_channel"] is None
    assert "_verdict" not in state.ctx and "b" not in state.ctx
