"""`flowerbox report RUN`: a run drawn on the host from the box-written run dir, read as
hostile input. The run is a real flower on the fake API writing where a box's flower writes
(its events file named by the flowerbox run id); the box's side is then turned hostile."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from flowerbox.cli.app import app
from flowerbox.runs import records
from tests.cli.conftest import flower, offline_env
from tests.flowerbox.test_runs import started

RUN_ID = "20260101-000000-feed00"
HOSTILE = "</title></svg><script>alert(1)</script>"


def test_report_draws_a_box_run_and_refuses_what_the_box_planted(
    xdg_state: Path, fake_api: FakeAPI, claude_home: Path, tmp_path: Path
) -> None:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    spec = started(ws, RUN_ID)
    fake_api.script = starter_cast()
    args = [DEMO_ASK, "--timeout", "0", "-w", str(ws), "--run-dir", str(spec.run_dir)]
    env = offline_env(fake_api, claude_home)
    done = flower(*args, "--events", str(spec.events_file), env=env, cwd=ws)
    assert done.returncode == 0, done.stderr
    records.record_end(spec, 0)
    manifest = spec.run_dir / "manifest.json"
    rows = json.loads(manifest.read_text())
    rows[1]["step"] = HOSTILE
    manifest.write_text(json.dumps(rows))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "progress.json").write_text('{"workspaces": {"SECRET-PLANTED": {}}}')
    (spec.run_dir / "progress.json").unlink()
    (spec.run_dir / "progress.json").symlink_to(outside / "progress.json")

    drawn = CliRunner().invoke(app, ["report", RUN_ID, "-w", str(ws)])
    assert drawn.exit_code == 0, drawn.output
    page = spec.state_dir / "report.html"  # host-only: nothing the box can replace
    assert f"wrote {page}" in drawn.stderr
    html = page.read_text()
    assert html.count('class="bar ') == 4 and "flower run · ws · achieved" in html
    assert 'class="wait"' in html  # q1, from the events file named by the flowerbox run id
    assert "progress.json: not read" in html and "SECRET-PLANTED" not in html  # the link
    assert "&lt;/title&gt;&lt;/svg&gt;&lt;script&gt;" in html and "<script" not in html


def test_report_of_a_run_with_no_steps_says_so(xdg_state: Path, tmp_path: Path) -> None:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    started(ws, RUN_ID)
    drawn = CliRunner().invoke(app, ["report", "-w", str(ws)])
    assert drawn.exit_code == 2
    assert f"run {RUN_ID} recorded no steps yet" in drawn.output
