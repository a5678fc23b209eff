"""The record of box runs and the commands around them, where no engine is needed: meta files,
run lookup, ps, logs, answer/send into a real HumanChannel's mailbox, and the refusals."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flower.cli.eventlog import EventLog
from flower.core.events import Event
from flower.core.human import HumanChannel
from flowerbox.box import state
from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import prepare
from flowerbox.box.spec import BoxSpec, Limits
from flowerbox.cli.app import app
from flowerbox.errors import RunError
from flowerbox.runs import control, records
from flowerbox.runs.detach import carried, remaining_budget, resume_command
from tests.flowerbox.conftest import routed
from tests.json_contract import parse_document

runner = CliRunner()
SECRET = "sk-ant-real-secret-runs-0123456789"


def make_spec(ws: Path, run_id: str, **changes: object) -> BoxSpec:
    spec = BoxSpec(
        image="flowerbox:dev",
        workspace=ws,
        run_dir=ws / "runs",
        home=ws / "runs" / "home",
        socket_dir=Path("/tmp/fbx-none"),
        secrets_dir=Path("/tmp/fbx-secrets-none"),
        state_dir=state.runs_folder() / run_id,
        uid=1000,
        gid=1000,
        command=("flower", "go", "hi"),
        run_id=run_id,
        workbench=ws.parent / f".flower-{ws.name}",
        limits=Limits(pids=64, memory="1g", cpus=0.5),
        budget_usd=2.5,
    )
    return replace(spec, **changes)  # type: ignore[arg-type]


def started(ws: Path, run_id: str, *, command: list[str] | None = None) -> BoxSpec:
    """A run recorded as running, kept by this (living) test process."""
    spec = make_spec(ws, run_id)
    records.record_start(spec, command=command or ["go", "hi"], detached=True)
    records.mark_running(spec.state_dir, keeper_pid=os.getpid())
    return spec


def test_a_spec_survives_the_meta_file_field_for_field(tmp_path: Path) -> None:
    spec = make_spec(tmp_path / "ws", "20260101-000000-abcdef")
    back = records.spec_from_json(json.loads(json.dumps(records.spec_to_json(spec))))
    assert back == spec and isinstance(back.workspace, Path) and isinstance(back.limits, Limits)
    none = make_spec(tmp_path / "ws", "20260101-000000-0000ff", workbench=None, budget_usd=None)
    assert records.spec_from_json(records.spec_to_json(none)) == none


def test_the_meta_file_follows_a_run_from_start_to_its_exit_code(
    xdg_state: Path, tmp_path: Path
) -> None:
    spec = make_spec(tmp_path / "ws", "20260101-000000-aaaaaa")
    run = records.record_start(spec, command=["go", "hi"], detached=True)
    assert run.meta["status"] == "starting" and run.running
    assert run.meta["containers"] == {
        "agent": "flowerbox-20260101-000000-aaaaaa",
        "gateway": "flowerbox-gateway-20260101-000000-aaaaaa",
    }
    assert spec.state_dir.parent == xdg_state / "flowerbox" / "runs"
    records.mark_running(spec.state_dir, keeper_pid=os.getpid())
    assert (loaded := records.load(spec.state_dir)) is not None and loaded.status == "running"
    spec.gateway_dir.mkdir()
    spec.usage_file.write_text(json.dumps({"total_cost_usd": 0.125}))
    assert loaded.cost_usd() == 0.125  # live, from the gateway's host-only ledger
    records.record_end(spec, 130)
    ended = records.load(spec.state_dir)
    assert ended is not None and (ended.status, ended.exit_code) == ("stopped", 130)
    assert ended.meta["ended"] and ended.meta["cost_usd"] == 0.125 and not ended.running
    # A keeper that ends the run before the starter marks it running keeps the end.
    records.mark_running(spec.state_dir, keeper_pid=os.getpid())
    assert records.load(spec.state_dir).status == "stopped"  # type: ignore[union-attr]


def test_an_attached_run_is_running_at_once_and_never_takes_an_older_runs_cost(
    xdg_state: Path, tmp_path: Path
) -> None:
    older = make_spec(tmp_path / "ws", "20260101-000000-a77a01")
    older.gateway_dir.mkdir(parents=True)
    older.usage_file.write_text(json.dumps({"total_cost_usd": 9.0}))  # the previous gateway
    spec = make_spec(tmp_path / "ws", "20260101-000000-a77a00")
    run = records.record_start(spec, command=["go", "hi"], detached=False)
    assert run.status == "running" and run.meta["keeper_pid"] == os.getpid()
    records.record_end(spec, 2)  # e.g. the gateway never started: each run has its own ledger
    ended = records.load(spec.state_dir)
    assert ended is not None and ended.status == "error" and "cost_usd" not in ended.meta


def test_a_running_run_whose_keeper_died_reads_as_lost(xdg_state: Path, tmp_path: Path) -> None:
    zombie = subprocess.Popen(["true"])  # dead but not reaped yet, as under a lazy init
    deadline = time.monotonic() + 10
    while Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    spec = make_spec(tmp_path / "zws", "20260101-000000-zzzzzz")
    records.record_start(spec, command=["go", "hi"], detached=True)
    records.mark_running(spec.state_dir, keeper_pid=zombie.pid)
    assert records.load(spec.state_dir).status == "lost"  # type: ignore[union-attr]
    zombie.wait()
    dead = zombie
    spec = make_spec(tmp_path / "ws", "20260101-000001-bbbbbb")
    records.record_start(spec, command=["go", "hi"], detached=True)
    records.mark_running(spec.state_dir, keeper_pid=dead.pid)
    lost = records.load(spec.state_dir)
    assert lost is not None and lost.status == "lost" and lost.unkept and not lost.running
    with pytest.raises(RunError, match=f"`flowerbox stop {spec.run_id}` cleans it up"):
        records.ensure_idle(spec.workspace)  # its containers may still use the workspace
    records.record_end(spec, None)  # what reaping a run whose agent vanished records
    reaped = records.load(spec.state_dir)
    assert reaped is not None and (reaped.status, reaped.unkept) == ("lost", False)
    records.ensure_idle(spec.workspace)


def test_runs_are_found_by_prefix_newest_first_and_across_workspaces(
    xdg_state: Path, tmp_path: Path
) -> None:
    ws, other = tmp_path / "ws", tmp_path / "other"
    with pytest.raises(RunError, match="no flowerbox runs in"):
        records.find(ws, None)
    started(ws, "20260101-000000-111111")
    time.sleep(0.01)
    started(ws, "20260101-000001-222222")
    started(other, "20260102-000000-333333")
    assert records.find(ws, None).run_id == "20260101-000001-222222"
    shell = started(ws, "20260101-000002-444444", command=["shell"])
    assert records.find(ws, None).run_id == "20260101-000001-222222"  # a shell only by its id
    assert records.find(ws, "20260101-000002").run_id == shell.run_id
    assert records.find(ws, "20260101-000000").run_id == "20260101-000000-111111"
    assert records.find(ws, "20260102").run_id == "20260102-000000-333333"  # from the index
    with pytest.raises(RunError, match="names 3 runs"):
        records.find(ws, "20260101")
    with pytest.raises(RunError, match="ps --all"):
        records.find(ws, "nope")
    assert [r.run_id[-6:] for r in records.all_runs()] == ["111111", "222222", "333333", "444444"]


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[tuple[HumanChannel, asyncio.AbstractEventLoop]]:
    """A real HumanChannel on its own loop in a thread, attached to <ws>/runs."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    human = HumanChannel(timeout_s=60)

    async def attach() -> None:
        human.attach(tmp_path / "ws" / "runs")

    asyncio.run_coroutine_threadsafe(attach(), loop).result(10)
    try:
        yield human, loop
    finally:
        asyncio.run_coroutine_threadsafe(human.aclose(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_ps_shows_the_pending_question_and_answer_reaches_the_channel(
    xdg_state: Path, tmp_path: Path, channel: tuple[HumanChannel, asyncio.AbstractEventLoop]
) -> None:
    human, loop = channel
    ws = tmp_path / "ws"
    spec = started(ws, "20260101-000000-cccccc", command=["go", "写 hello"])
    asked = asyncio.run_coroutine_threadsafe(human.ask("用哪个解释器?", ["python3", "pypy"]), loop)
    deadline = time.monotonic() + 10
    while not (spec.run_dir / "asks.json").read_text().count("q1") and time.monotonic() < deadline:
        time.sleep(0.02)
    listed = runner.invoke(app, ["ps", "--json", "-w", str(ws)])
    assert listed.exit_code == 0, listed.output
    [row] = parse_document(listed.stdout)["runs"]
    assert row["run_id"] == spec.run_id and row["status"] == "running"
    assert row["pending_asks"] == [
        {"id": "q1", "question": "用哪个解释器?", "options": ["python3", "pypy"]}
    ]
    table = runner.invoke(app, ["ps", "-w", str(ws)])
    assert "q1: 用哪个解释器?" in table.stdout and "flowerbox answer q1" in table.stdout
    wrong = runner.invoke(app, ["answer", "q7", "x", "-w", str(ws)])
    assert wrong.exit_code == 2 and "no answer to 'q7' (pending: q1)" in wrong.stderr
    done = runner.invoke(app, ["answer", "q1", "python3", "-w", str(ws)])
    assert done.exit_code == 0, done.output
    assert "q1: delivered" in done.stderr
    ask = asked.result(10)
    assert (ask.state, ask.answer) == ("answered", "python3")
    assert not list((spec.run_dir / "inbox").glob("*.json"))  # taken, not left behind
    sent = runner.invoke(app, ["send", "也写个测试", "-w", str(ws)])
    assert sent.exit_code == 0 and "delivered" in sent.stderr
    assert human._unread[-1][1] == "也写个测试"


def test_ps_shows_a_box_written_question_sanitized_and_its_answer_command_quoted(
    xdg_state: Path, tmp_path: Path
) -> None:
    """Issue 37: the question's text is the box's (escapes, a bidi override, 10 KB of nested
    JSON before it), and so is its id, which ps prints inside a command meant for pasting."""
    ws = tmp_path / "ws"
    spec = started(ws, "20260101-000000-dddddd", command=["go", "x"])
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    (spec.run_dir / "asks.json").write_text("[" * 10_000 + "]" * 10_000)
    deep = runner.invoke(app, ["ps", "-w", str(ws)])
    assert deep.exit_code == 0 and deep.exception is None, deep.output
    ask = {"id": "q1; touch /tmp/x", "question": "Which?\x1b]52;c;eA==\x07\u202e", "options": []}
    (spec.run_dir / "asks.json").write_text(json.dumps([ask]))
    table = runner.invoke(app, ["ps", "-w", str(ws)])
    assert table.exit_code == 0, table.output
    assert "Which?" in table.stdout and "flowerbox answer 'q1; touch /tmp/x'" in table.stdout
    assert not any(char in table.stdout for char in "\x1b\x07\u202e")


def test_a_question_a_killed_box_left_is_not_the_resumed_runs_until_asked_again(
    xdg_state: Path, tmp_path: Path
) -> None:
    """Issue 30: a box killed while its question waited left asks.json behind; the run that
    resumes it showed that question as its own, and `answer` took it, to be refused in the
    box (its flower has not asked it yet). Only questions asked since the box started count."""
    ws = tmp_path / "ws"
    spec = started(ws, "20260101-000000-eeeeee", command=["go", "x"])
    began = records.moment(records.find(ws, None), "started")
    assert began is not None
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    stale = {"id": "q1", "question": "Which?", "options": [], "asked_at": began - 30.0}
    (spec.run_dir / "asks.json").write_text(json.dumps([stale]))
    [row] = parse_document(runner.invoke(app, ["ps", "--json", "-w", str(ws)]).stdout)["runs"]
    assert row["pending_asks"] == []
    refused = runner.invoke(app, ["answer", "q1", "x", "-w", str(ws)])
    assert refused.exit_code == 2 and "(pending: none)" in refused.stderr
    asked = {**stale, "asked_at": began + 1.0}  # asked again by the resumed box
    (spec.run_dir / "asks.json").write_text(json.dumps([asked]))
    [row] = parse_document(runner.invoke(app, ["ps", "--json", "-w", str(ws)]).stdout)["runs"]
    assert row["pending_asks"] == [{"id": "q1", "question": "Which?", "options": []}]


def test_what_cannot_be_done_to_an_ended_run_exits_2_saying_what_can(
    xdg_state: Path, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert runner.invoke(app, ["logs", "-w", str(ws)]).exit_code == 2
    nothing = runner.invoke(app, ["stop", "-w", str(ws)])
    assert nothing.exit_code == 2 and "no flowerbox runs in" in nothing.stderr
    spec = started(ws, "20260101-000000-dddddd")
    records.record_end(spec, 0)
    for command in (["stop"], ["attach"], ["answer", "q1", "x"], ["send", "x"]):
        result = runner.invoke(app, [*command, "-w", str(ws)])
        assert result.exit_code == 2, (command, result.output)
        assert "has already ended (done, exit 0)" in result.stderr
        assert f"flowerbox resume {spec.run_id}" in result.stderr
    unknown = runner.invoke(app, ["stop", "zzz", "-w", str(ws)])
    assert unknown.exit_code == 2 and "no run 'zzz'" in unknown.stderr
    live = started(ws, "20260101-000001-eeeeee")
    still = runner.invoke(app, ["resume", "-w", str(ws)])
    assert still.exit_code == 2 and f"flowerbox attach {live.run_id}" in still.stderr
    queued = make_spec(ws, "20260101-000002-ffffff")
    records.record_start(queued, command=["go", "hi"], detached=True)
    records.record_end(queued, 130)
    later = runner.invoke(app, ["send", "继续时先看这个", "-w", str(ws)])
    assert later.exit_code == 0 and "reads this when you `flowerbox resume`" in later.stderr
    [dropped] = (queued.run_dir / "inbox").glob("*.json")
    assert json.loads(dropped.read_text()) == {"send": "继续时先看这个"}


def test_logs_renders_the_event_stream_and_follows_it_to_the_end(
    xdg_state: Path, tmp_path: Path
) -> None:
    spec = started(tmp_path / "ws", "20260101-000000-abcabc")
    log = EventLog(spec.events_file)
    log(Event("step", "干活", payload={"index": 0, "total": 1}))
    log(Event("tool_call", "python3 hello.py", tool="Bash"))
    log(Event("ask", "哪个?", payload={"kind": "question", "id": "q1", "state": "asked"}))
    with spec.events_file.open("a") as junk:
        junk.write('not json\n42\n["a list"]\n')  # skipped, never the end of following

    def finish() -> None:
        time.sleep(0.5)
        log(Event("text", "都做完了"))
        log.close()
        records.record_end(spec, 0)

    seen: list[Event] = []
    writer = threading.Thread(target=finish)
    writer.start()
    run = records.find(spec.workspace, None)
    final = control.follow_events(run, seen.append, follow=True)
    writer.join()
    assert [e.kind for e in seen] == ["step", "tool_call", "ask", "text"]
    assert seen[1].tool == "Bash" and seen[2].payload["id"] == "q1" and final.exit_code == 0
    shown = runner.invoke(app, ["logs", spec.run_id, "-w", str(spec.workspace)])
    assert shown.exit_code == 0
    assert "[Bash] python3 hello.py" in shown.stdout and "?? q1: 哪个?" in shown.stdout
    assert f"{spec.run_id}: done, exit 0" in shown.stderr


def test_resume_continues_the_run_with_the_old_settings(tmp_path: Path) -> None:
    woke = resume_command(["go", "写 hello", "--timeout", "0"])
    assert woke == ["go", "写 hello", "--continue", "--timeout", "0"]  # flower decides inside
    again = resume_command(["go", "写 hello", "--new", "--json", "--continue"])
    assert again == ["go", "写 hello", "--continue", "--json"]
    assert resume_command(["run", "/w/flow.py"]) == ["run", "/w/flow.py"]
    old = make_spec(tmp_path / "ws", "20260101-000000-01d01d", socket_dir=Path("/tmp/fbx-old"))
    fresh = make_spec(
        tmp_path / "ws",
        "20260101-000001-0e90e9",
        socket_dir=Path("/tmp/fbx-new"),
        budget_usd=None,
        limits=Limits(),
    )
    both = carried(fresh, old)
    assert (both.run_id, both.socket_dir) == ("20260101-000001-0e90e9", Path("/tmp/fbx-new"))
    assert both.state_dir == fresh.state_dir
    assert (both.budget_usd, both.limits) == (2.5, old.limits)


def test_prepare_asks_flower_for_its_events_in_the_runs_folder(
    xdg_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    for command in (["go", "hi"], ["once", "hi"], ["shell"]):
        prepared = prepare(command, BoxOptions(workspace=ws, isolate=command[0] == "go"))
        try:
            spec = prepared.spec
            events = str(ws.resolve() / "runs" / "events" / f"{spec.run_id}.jsonl")
            has = list(spec.command[-2:]) == ["--events", events]
            assert has == (command[0] != "shell"), spec.command
            assert spec.state_dir == xdg_state / "flowerbox" / "runs" / spec.run_id
        finally:
            prepared.cleanup()


def test_a_second_flower_run_in_a_busy_workspace_is_refused_before_any_container(
    xdg_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    live = started(ws, "20260101-000000-999999")
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/nonexistent.sock")  # never reached
    before = set(state.socket_root().glob("fbx-*"))
    for command in (["go", "hi", "--detach"], ["once", "hi"]):
        result = runner.invoke(app, [*command, "-w", str(ws)])
        assert result.exit_code == 2, result.output
        assert f"run {live.run_id} is still running in {ws}" in result.stderr
        assert f"flowerbox stop {live.run_id}" in result.stderr
    assert not set(state.socket_root().glob("fbx-*")) - before  # the private folders went too
    assert [r.run_id for r in records.runs_of(ws)] == [live.run_id]  # nothing recorded


def test_ps_all_lists_every_workspace_with_its_folder(xdg_state: Path, tmp_path: Path) -> None:
    first = started(tmp_path / "one", "20260101-000000-010101")
    second = started(tmp_path / "two", "20260101-000001-020202")
    records.record_end(second, 1)
    here = runner.invoke(app, ["ps", "-w", str(tmp_path / "one")])
    assert first.run_id in here.stdout and second.run_id not in here.stdout
    listed = runner.invoke(app, ["ps", "--all", "--json"])
    rows = {row["run_id"]: row for row in parse_document(listed.stdout)["runs"]}
    assert rows[first.run_id]["status"] == "running" and rows[first.run_id]["exit_code"] is None
    assert (rows[second.run_id]["status"], rows[second.run_id]["exit_code"]) == ("failed", 1)
    assert rows[second.run_id]["workspace"] == str(tmp_path / "two")
    table = runner.invoke(app, ["ps", "--all"])  # 80 columns: the ids stay whole
    assert "WORKSPACE" in table.stdout
    assert first.run_id in table.stdout and second.run_id in table.stdout


def test_ps_in_a_log_cuts_neither_paths_nor_commands(xdg_state: Path, tmp_path: Path) -> None:
    deep = tmp_path / "a-workspace-folder-with-a-name-long-enough-to-pass-eighty-columns-alone"
    ask = ["go", "add a --json flag to the report command and document it in the README"]
    spec = started(deep, "20260101-000000-030303", command=ask)
    table = runner.invoke(app, ["ps", "--all"], env={"COLUMNS": "80"})  # CliRunner: no tty
    assert str(deep) in table.stdout and ask[1] in table.stdout and "…" not in table.stdout
    assert spec.run_id in table.stdout


def test_a_line_typed_in_attach_answers_the_question_or_becomes_a_message(
    xdg_state: Path,
    tmp_path: Path,
    channel: tuple[HumanChannel, asyncio.AbstractEventLoop],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    human, loop = channel
    spec = started(tmp_path / "ws", "20260101-000000-a77ac4")
    asked = asyncio.run_coroutine_threadsafe(human.ask("哪个解释器?"), loop)
    run = records.find(spec.workspace, None)
    deadline = time.monotonic() + 30  # the question on disk, where attach reads it: typed
    while not run.pending_asks() and time.monotonic() < deadline:  # earlier, it is a message
        time.sleep(0.02)
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd) as typed, os.fdopen(write_fd, "w") as keyboard:
        monkeypatch.setattr("sys.stdin", typed)
        done = threading.Event()
        reader = threading.Thread(target=control.read_answers, args=(run, done))
        reader.start()
        try:
            keyboard.write("python3\n")
            keyboard.flush()
            ask = asked.result(30)  # a deadline, not a speed check: loaded CI machines are slow
            assert (ask.state, ask.answer) == ("answered", "python3")
            keyboard.write("顺便加个测试\n")
            keyboard.flush()
            deadline = time.monotonic() + 30
            while not human._unread and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            done.set()  # the reader stops before its stdin closes, whatever happened
            reader.join(5)
    assert human._unread[-1][1] == "顺便加个测试" and not reader.is_alive()


def test_the_run_commands_are_commands_not_asks() -> None:
    for command in ("ps", "logs", "attach", "stop", "resume", "answer", "send"):
        assert routed([command, "x"]) == [command, "x"]
    assert routed(["stop the server"]) == ["go", "stop the server"]


def test_a_resumed_run_gets_what_is_left_of_its_budget_not_a_fresh_one(
    xdg_state: Path, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    spec = started(ws, "20260101-000000-b0d6e7")  # a budget of $2.50
    spec.gateway_dir.mkdir()
    spec.usage_file.write_text(json.dumps({"total_cost_usd": 1.0}))
    records.record_end(spec, 130)
    stopped = records.find(ws, None)
    assert remaining_budget(stopped, None) == 1.5
    assert remaining_budget(stopped, 7.0) == 7.0
    spent = make_spec(ws, "20260101-000001-b0d6e8")
    records.record_start(spent, command=["go", "hi"], detached=True)
    spent.gateway_dir.mkdir()
    spent.usage_file.write_text(json.dumps({"total_cost_usd": 2.5}))  # its gateway, meanwhile
    records.record_end(spent, 1)
    refused = runner.invoke(app, ["resume", "-w", str(ws)])
    assert refused.exit_code == 2
    assert "has spent its budget of $2.5" in refused.stderr and "--budget USD" in refused.stderr
    unlimited = make_spec(ws, "20260101-000002-b0d6e9", budget_usd=None)
    records.record_start(unlimited, command=["go", "hi"], detached=True)
    records.record_end(unlimited, 130)
    assert remaining_budget(records.find(ws, None), None) is None


def test_ps_prints_a_box_written_question_as_text_not_markup(
    xdg_state: Path, tmp_path: Path
) -> None:
    spec = started(tmp_path / "ws", "20260101-000000-0b0b0b")
    planted = [{"id": "q1[/]", "question": "[bold]pick[/bold]", "options": ["[red]a[/red]", 2]}]
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    (spec.run_dir / "asks.json").write_text(json.dumps(planted))
    shown = runner.invoke(app, ["ps", "-w", str(spec.workspace)])
    assert shown.exit_code == 0, shown.output
    assert f"{spec.run_id} q1[/]: [bold]pick[/bold]  [[red]a[/red] / 2]" in shown.stdout
