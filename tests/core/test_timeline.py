"""read_timeline on run directories written by hand: the bounds and the types hold whatever
the files hold (the end-to-end runs are in tests/cli/test_report.py)."""

from __future__ import annotations

import json
from pathlib import Path

from flower.core.timeline import (
    LABEL_LIMIT,
    MAX_BARS,
    MAX_MARKS,
    TEXT_LIMIT,
    read_timeline,
)

RUN = "20260101-120000-abcdef"


def _row(i: int, **extra: object) -> dict[str, object]:
    start = 1_000.0 + i
    return {"run": RUN, "step": f"s{i}", "started_at": start, "ended_at": start + 0.5,
            "ok": True, "cost_usd": 0.01, "state": "ended", **extra}  # fmt: skip


def test_sizes_are_bounded(tmp_path: Path) -> None:
    rows = [_row(i) for i in range(MAX_BARS + 300)]
    rows[-1]["step"] = "x" * 1_000_000
    rows[-1]["error"] = "e" * 1_000_000
    (tmp_path / "manifest.json").write_text(json.dumps(rows))
    (tmp_path / "events").mkdir()
    lines = [{"t": 1_000.0 + i / 10, "kind": "retry", "text": "r" * 5_000} for i in range(9_000)]
    (tmp_path / "events" / f"{RUN}.jsonl").write_text("\n".join(map(json.dumps, lines)))
    timeline = read_timeline(tmp_path, runs=[RUN])
    assert len(timeline.bars) == MAX_BARS and timeline.bars[0].label == "s300"  # the latest
    assert (
        len(timeline.bars[-1].label) == LABEL_LIMIT and len(timeline.bars[-1].error) == TEXT_LIMIT
    )
    assert len(timeline.marks) == MAX_MARKS and {len(m.text) for m in timeline.marks} == {
        TEXT_LIMIT
    }


def test_wrong_types_become_defaults_not_errors(tmp_path: Path) -> None:
    rows = [
        _row(0, started_at="soon", ended_at=float("inf"), cost_usd=-5, attempts=True),
        "not a row",
        {"run": 7},
        _row(1, step=["a"], state="running", text={"x": 1}),
    ]
    (tmp_path / "manifest.json").write_text(json.dumps(rows).replace("Infinity", "1e999"))
    (tmp_path / "progress.json").write_text('{"workspaces": 5}')
    (tmp_path / "asks.json").write_text('[{"id": 3}, {"id": "q1", "asked_at": "x"}]')
    timeline = read_timeline(tmp_path)
    first, second = timeline.bars
    assert (first.start, first.end, first.cost_usd, first.attempts) == (0.0, 0.0, 0.0, 1)
    assert second.label == "['a']" and second.state == "unfinished"
    assert timeline.waits == () and timeline.problems == ()


def test_a_rejected_round_and_its_ruling_share_their_steps_lanes(tmp_path: Path) -> None:
    ruling = "## 结论\n{}\n\n## 理由\n{}"
    rows = [
        _row(0, step="干活"),
        _row(1, step="干活·判定#1", text=ruling.format("未达成", "没测负数")),
        _row(2, step="干活#round2"),
        _row(3, step="干活·判定#2", text=ruling.format("达成", "都过了")),
    ]
    (tmp_path / "manifest.json").write_text(json.dumps(rows))
    timeline = read_timeline(tmp_path)
    assert [bar.lane for bar in timeline.bars] == ["干活", "干活·判定", "干活", "干活·判定"]
    assert [(b.verdict, b.reason) for b in timeline.verdicts] == [
        ("not_yet", "没测负数"),
        ("achieved", "都过了"),
    ]
    assert timeline.status == "achieved" and timeline.cost[-1] == (1_003.5, 0.04)
