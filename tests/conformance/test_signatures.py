"""The seeds' signatures (seed_table.py, written from the pages, issue 35): each name the
seeds show has the seed's parameters or a deviation docs/decisions.md records. Beside it,
signatures.json snapshots every public signature of the code (the seeds' and flower's
own), so any drift, seed-shown or not, fails loudly with a diff and the command that
re-records it after a deliberate change (issue 22)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flower
from tests.conformance import signatures
from tests.conformance.seed_table import DEVIATIONS, SEED, seed_drift
from tests.conformance.signatures import WRITE, current, drift, main, recorded


def test_every_signature_the_seeds_show_is_the_seeds_or_a_recorded_deviation() -> None:
    """Seeds 000, 003, 004: the parameters of each callable and dataclass they show (names,
    order, `*`, defaults), as seed_table.SEED writes them from the pages."""
    assert seed_drift() == []


def test_a_recorded_deviation_deviates_and_names_its_record() -> None:
    """DEVIATIONS lists only real deviations of names the seeds show, each with its reason."""
    for name, (ours, why) in DEVIATIONS.items():
        assert name in SEED and ours != SEED[name][1], name
        assert why.startswith("decisions.md"), name


def test_a_signature_off_the_seed_fails_the_seed_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: with_goal renamed a keyword (as build_options once renamed
    prelude), and a deviation that is not recorded."""

    def with_goal(step: Any, channel: Any, *, path: str, rounds: int = 3) -> None: ...

    monkeypatch.setattr(flower, "with_goal", with_goal)
    [drift] = seed_drift()
    assert drift.startswith("with_goal (000:236)")
    monkeypatch.delitem(DEVIATIONS, "build_options")
    assert [d.split(" ")[0] for d in seed_drift()] == ["build_options", "with_goal"]


def test_every_public_signature_is_the_recorded_one() -> None:
    """signatures.json, a snapshot of the code: one entry per name of `flower.__all__` and
    per public method or property of its classes, so flower's own names drift loudly too."""
    if diff := drift():
        pytest.fail(
            f"flower's public signatures differ from the record:\n{diff}\n"
            f"If the change is deliberate, re-record them: {WRITE}",
            pytrace=False,
        )


def test_the_record_covers_every_public_name() -> None:
    """A name added to `flower.__all__` without re-recording is a drift, not a gap."""
    names = set(recorded())
    assert set(flower.__all__) <= names
    assert {"Runtime.run", "Runtime.interrupt", "Workflow.run", "Brief.parse"} <= names


def test_a_changed_signature_shows_in_the_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a public function with another signature is the diff's one change."""

    def load_dotenv(path: str) -> dict[str, str]:
        return {}

    monkeypatch.setattr(flower, "load_dotenv", load_dotenv)
    diff = drift().splitlines()
    changed = [line for line in diff[2:] if line[:1] in "+-"]
    assert [line.split('"')[1] for line in changed] == ["load_dotenv", "load_dotenv"]
    assert changed[1] == '+ "load_dotenv": "def (path: str) -> dict[str, str]",'


def test_write_records_what_the_check_then_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The command: --write records, a plain run then agrees (0) until something drifts (1)."""
    monkeypatch.setattr(signatures, "RECORD", tmp_path / "signatures.json")
    assert main(["--write"]) == 0
    assert recorded() == current()
    assert main([]) == 0 and "wrote" in capsys.readouterr().out
    monkeypatch.setattr(flower, "describe", lambda: "")
    assert main([]) == 1 and '"describe"' in capsys.readouterr().out
    assert main(["--what"]) == 2
