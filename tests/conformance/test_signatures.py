"""The public signatures are the recorded ones (issue 22): a drift fails loudly, with a diff and
the command that re-records them after a deliberate change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flower
from tests.conformance import signatures
from tests.conformance.signatures import WRITE, current, drift, main, recorded


def test_every_public_signature_is_the_recorded_one() -> None:
    """Seed 000 ("API Python") pins the signatures of the public names; signatures.json holds
    ours (the seed's, plus the deviations docs/decisions.md records), one entry per name of
    `flower.__all__` and per public method or property of its classes."""
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
