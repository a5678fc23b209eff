"""`flower report`: a real run on the fake model, drawn, then looked at in a real headless
Chromium (its DOM and its screenshots); and the same with the run's files turned hostile."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from bench.faults import run_faulted
from flower.cli.picture import COLOURS, CSP, TOOL_COLOURS, WAIT_COLOUR, size
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.core.timeline import read_timeline
from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.browser import chromium, count, dump_dom, pixels, screenshot
from tests.cli.conftest import flower


def test_a_faulted_run_is_drawn_with_its_rounds_faults_and_verdicts(tmp_path: Path) -> None:
    job = run_faulted(tmp_path)  # six faults, a SIGKILL in round 2, then the same ask again
    assert job.code == 0, job.summary
    assert str(job.summary["report"]).startswith("flower report ")  # the JSON summary names it
    chromium()
    runs, page = tmp_path / "runs", tmp_path / "r.html"
    drawing, png = tmp_path / "r.svg", tmp_path / "r.png"
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    args = ["report", str(runs), "-w", str(job.workspace), "-o", str(page)]
    done = flower(*args, "--svg", str(drawing), "--png", str(png), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    dom = dump_dom(page)
    assert "<title>flower 运行 · ws · 达成 · $" in dom  # the suite speaks zh
    bars = [line for line in dom.split("<rect") if 'class="bar ' in line]
    assert len(bars) == 7  # clarify, goal, work, judge #1, the killed round 2, round 2, judge #2
    assert sum('class="bar unfinished"' in bar for bar in bars) == 1  # the killed attempt
    assert sum('class="bar not_yet"' in bar for bar in bars) == 1  # round 1 rejected
    for kind in ("fault", "retry", "handoff", "message"):
        assert f'class="mark {kind}"' in dom, kind
    assert 'class="wait"' in dom  # q1, which nobody answered
    ET.fromstring(drawing.read_text())  # the SVG alone is well-formed XML

    shot = tmp_path / "page.png"
    screenshot(page, shot, width=1280, height=900)
    for path in (shot, png):
        width, height, rows = pixels(path)
        assert count(rows, COLOURS["ok"]) > 2000, path  # the green bars are drawn
        assert count(rows, COLOURS["not_yet"]) > 1000, path  # round 1's amber verdict
        assert count(rows, COLOURS["unfinished"]) > 1000, path  # the killed attempt, blue
        assert count(rows, WAIT_COLOUR) > 20, path
    assert pixels(png)[:2] == size(read_timeline(runs, workspace=job.workspace))


def test_the_end_of_a_run_says_how_to_draw_it(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    done = demo_run(fake_api, cli_env, workspace)
    line = done.stdout.strip().splitlines()[-1]
    assert line == "运行图:flower report runs -w ws"  # the suite's language (zh)
    drawn = flower(*line.split(":", 1)[1].split()[1:], env=cli_env, cwd=workspace.parent)
    assert drawn.returncode == 0, drawn.stderr
    html = (workspace.parent / "runs" / "report.html").read_text()
    assert "flower 运行 · ws · 达成" in html and "两条都核对过" in html  # the verdict's reason


def demo_run(api: FakeAPI, env: dict[str, str], workspace: Path) -> CompletedProcess[str]:
    """The demo ask, run to its end in `workspace` (`-w ws`, from the folder above it)."""
    api.script = starter_cast()
    done = flower(DEMO_ASK, "--timeout", "0", "-w", workspace.name, env=env, cwd=workspace.parent)
    assert done.returncode == 0, done.stderr
    return done


HOSTILE = "<script>document.title='pwned'</script></svg></title><img src=x onerror=alert(1)>"


def test_hostile_names_verdicts_and_files_stay_text(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    """What a box could write into runs/: markup in a step name, a verdict, an event and a
    question; a link where the page goes; a link to a secret as an events file; a FIFO."""
    demo_run(fake_api, cli_env, workspace)
    runs = tmp_path / "runs"
    rows = json.loads((runs / "manifest.json").read_text())
    rows[0]["step"] = HOSTILE + "x" * 100_000
    rows[-1]["text"] = f"## 结论\n达成\n\n## 理由\n{HOSTILE}"
    (runs / "manifest.json").write_text(json.dumps(rows))
    run = rows[0]["run"]
    events = runs / "events" / f"{run}.jsonl"
    line = {"t": rows[0]["started_at"] + 0.5, "kind": "error", "text": HOSTILE, "payload": {}}
    ask = {"kind": "question", "id": HOSTILE, "state": "asked"}
    asked = {"t": rows[0]["started_at"] + 0.6, "kind": "ask", "text": HOSTILE, "payload": ask}
    with events.open("a") as handle:
        handle.write(json.dumps(line) + "\n" + json.dumps(asked) + "\n\x00\xff junk\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    (runs / "events" / "20990101-000000-aaaaaa.jsonl").symlink_to(secret)
    progress = json.loads((runs / "progress.json").read_text())
    progress["workspaces"][str(workspace)]["runs"].append("20990101-000000-aaaaaa")
    (runs / "progress.json").write_text(json.dumps(progress))
    (runs / "asks.json").unlink()
    os.mkfifo(runs / "asks.json")  # opening it for reading would wait forever
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (runs / "report.html").symlink_to(victim)

    drawn = flower("report", "runs", "-w", str(workspace), env=cli_env, cwd=tmp_path, timeout=60)
    assert drawn.returncode == 0, drawn.stderr
    assert victim.read_text() == "untouched"  # the planted link was replaced, not followed
    page = runs / "report.html"
    assert page.is_file() and not page.is_symlink()
    html = page.read_text()
    assert "TOP-SECRET-VALUE" not in html and "not read" in html  # the link was refused
    assert len(html) < 200_000  # the 100 kB name was cut short
    assert "&lt;script&gt;" in html and "<script" not in html
    chromium()
    dom = dump_dom(page)
    assert "pwned" not in dom.split("</title>")[0]  # no script ran
    assert "<script" not in dom and "<img" not in dom  # nothing broke out into markup
    assert 'class="wait"' in dom and 'class="mark fault"' in dom  # yet they were drawn


@pytest.mark.english
def test_png_without_a_browser_says_what_to_install(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    demo_run(fake_api, cli_env, workspace)
    env = {**cli_env, "FLOWER_CHROMIUM": "no-such-browser"}
    drawn = flower("report", "--png", "r.png", env=env, cwd=tmp_path)
    assert drawn.returncode == 2
    assert "--png needs a headless Chromium: install it" in drawn.stderr
    assert (tmp_path / "runs" / "report.html").is_file()  # the page was written all the same


@pytest.mark.english  # its English (issue 36)
@pytest.mark.parametrize("made", [False, True])
def test_nothing_to_draw_exits_2(tmp_path: Path, cli_env: dict[str, str], made: bool) -> None:
    if made:
        (tmp_path / "runs").mkdir()
    drawn = flower("report", env=cli_env, cwd=tmp_path)
    assert drawn.returncode == 2
    assert ("no steps recorded" if made else "no run directory at runs") in drawn.stderr


def test_a_report_is_written_where_asked_even_with_no_events_file(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    demo_run(fake_api, cli_env, workspace)
    for events in (tmp_path / "runs" / "events").iterdir():
        events.unlink()  # a run from before events were kept by default
    out = tmp_path / "out.html"
    drawn = flower("report", "-w", str(workspace), "-o", str(out), env=cli_env, cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stderr.strip() == f"已写入 {out}"  # the suite's zh
    assert out.read_text().count('class="bar ') == 4
    assert not (tmp_path / "runs" / "report.html").exists()


SVG = "{http://www.w3.org/2000/svg}"
LANES = {
    "en": ["clarify (确认需求)", "goal (设定目标)", "work (干活)"],
    "zh": ["确认需求", "设定目标", "干活"],
}
WORDS = {
    "en": {"ok": "ok", "error": "error", "denied": "denied", "open": "no result"},
    "zh": {"ok": "成功", "error": "出错", "denied": "被拒绝", "open": "无结果"},
}
HEADINGS = {
    "en": ["Verdicts", "Steps", "Tool calls", "Waits for a human", "Faults, retries, handoffs"],
    "zh": ["判定", "步骤", "工具调用", "等人回答", "故障、重试、交接"],
}


def called(runs: Path) -> list[tuple[str, str]]:
    """(tool, outcome) of every tool call the run's events files hold, paired by id here."""
    calls: dict[str, list[str]] = {}
    for events in sorted((runs / "events").glob("*.jsonl")):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            payload = event["payload"]
            if event["kind"] == "tool_call":
                calls[payload["id"]] = [event["tool"], "open"]
            elif event["kind"] in ("tool_result", "denied") and payload["tool_use_id"] in calls:
                error = "error" if payload.get("is_error") else "ok"
                calls[payload["tool_use_id"]][1] = "denied" if event["kind"] == "denied" else error
    return sorted((name, outcome) for name, outcome in calls.values())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_report_speaks_the_runs_language_and_shows_each_steps_tool_calls(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, tmp_path: Path, lang: str
) -> None:
    """The same run (the demo, in zh) drawn in each language: lanes and tables as the live
    UI names them, the seeds' name beside where it differs; a tick per tool call, its name,
    duration and outcome on hover, equal to the events; still one page under its CSP."""
    demo_run(fake_api, cli_env, workspace)
    page = tmp_path / f"report-{lang}.html"
    args = ["report", "-w", str(workspace), "-o", str(page), "--lang", lang]
    drawn = flower(*args, env=cli_env, cwd=workspace.parent)
    assert drawn.returncode == 0, drawn.stderr
    html = page.read_text()
    assert f'<html lang="{lang}">' in html
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in html
    assert "<script" not in html and "src=" not in html and "href=" not in html  # loads nothing

    drawing = ET.fromstring(html.split('<div id="timeline">')[1].split("</div>")[0])
    names = [node.text for node in drawing.iter(f"{SVG}text")]
    assert [name for name in names if name in LANES["en"] + LANES["zh"]] == LANES[lang]
    # Each step that called tools has their lane under its own (clarify asked, work delegated).
    clarify, goal, work = LANES[lang]
    rows = names[names.index(clarify) : names.index(text_of(lang, "report.lane.human"))]
    tools = text_of(lang, "report.lane.tools")
    assert rows[:5] == [clarify, tools, goal, work, tools]
    headings = re.findall(r"<h2 id=\"\w+\">([^<]*)</h2>", html)
    assert headings == HEADINGS[lang]
    steps = html.split('<h2 id="steps">')[1].split("</table>")[0]
    for lane in LANES[lang]:
        assert f"<td>{lane}</td>" in steps

    ticks = [node for node in drawing.iter(f"{SVG}rect") if "tool" in node.get("class", "")]
    shown = []
    for tick in ticks:
        tool, took, outcome, *rest = tick.findtext(f"{SVG}title", "").split(" · ")
        assert re.fullmatch(r"\d+\.\ds", took), took
        assert float(took[:-1]) < 60
        word = {v: k for k, v in WORDS[lang].items()}[outcome]
        assert tick.get("class") == f"tool {word}"
        assert tick.get("fill") == TOOL_COLOURS[word]
        shown.append((tool, word))
    expected = called(workspace.parent / "runs")
    assert sorted(shown) == expected
    assert {"Agent", "Write", "Bash"} <= {tool for tool, _ in expected}
    assert ("Write", "ok") in shown and ("Bash", "ok") in shown
    worker = text_of(lang, "report.worker")
    assert any(f" · {worker} · " in (t.findtext(f"{SVG}title") or "") for t in ticks)

    chromium()
    dom = dump_dom(page)
    assert dom.count('class="tool ') == len(ticks) > 0
    # The CSP is the second line behind escaping: a script that got into the page (an
    # escape that failed) still does not run; without the policy it would (the control).
    planted = html.replace("</body>", "<script>document.title='pwned'</script></body>")
    broken, control = tmp_path / f"broken-{lang}.html", tmp_path / f"control-{lang}.html"
    broken.write_text(planted)
    control.write_text(
        planted.replace(f'content="{CSP}"', "content=\"script-src 'unsafe-inline'\"")
    )
    assert "<title>pwned</title>" in dump_dom(control)
    assert "<title>pwned</title>" not in dump_dom(broken)
    shot = tmp_path / f"page-{lang}.png"
    screenshot(page, shot, width=1280, height=900)
    assert count(pixels(shot)[2], TOOL_COLOURS["ok"]) > 20  # the ticks are drawn


def text_of(lang: str, key: str) -> str:
    table = {"en": EN, "zh": ZH}[lang]
    return table[key]
