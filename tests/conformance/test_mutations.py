"""The mutation registry (tests/conformance/mutations.py) still fits the table and the code:
every row of docs/conformance.md has a mutation of its statement that names the row's test,
or a recorded reason why none can be made, and every original snippet occurs exactly once
in its file (a refactor that moves the code fails here, not silently in a later run). Fast:
nothing is mutated here; `python -m tests.conformance.mutate` runs the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance import mutate
from tests.conformance.mutations import MUTATIONS, UNMUTABLE, Mutation
from tests.conformance.test_table import TABLE, rows


def uncovered() -> list[str]:
    covered = {(m.row, t.split("[")[0]) for m in MUTATIONS for t in m.tests}
    reasons = {(u.row, u.test) for u in UNMUTABLE}
    return [
        f"{row.id} {row.test}"
        for row in rows(TABLE.read_text(encoding="utf-8"))
        if (row.id, row.test) not in covered | reasons
    ]


def test_every_row_has_a_mutation_or_a_reason() -> None:
    assert uncovered() == []


def test_every_entry_is_a_row_of_the_table() -> None:
    ids = {row.id for row in rows(TABLE.read_text(encoding="utf-8"))}
    assert [m.row for m in MUTATIONS if m.row not in ids] == []
    assert [u.row for u in UNMUTABLE if u.row not in ids] == []
    assert all(u.reason.strip() for u in UNMUTABLE)


def test_each_snippet_occurs_once() -> None:
    """One test, not one per mutation: every test here pays the checkout check of
    tests/conformance/conftest.py."""
    assert [(m.row, m.file, why) for m in MUTATIONS if (why := mutate.stale(m)) is not None] == []


def test_a_moved_snippet_is_stale(tmp_path: Path) -> None:
    """The check can fail: a snippet absent or twice is reported."""
    (tmp_path / "f.py").write_text("a = 1\na = 1\nb = 2\n", encoding="utf-8")
    twice = Mutation("000:3", "f.py", "a = 1", "a = 2", ())
    gone = Mutation("000:3", "f.py", "c = 3", "c = 4", ())
    once = Mutation("000:3", "f.py", "b = 2", "b = 3", ())
    assert "2 times" in str(mutate.stale(twice, tmp_path))
    assert "0 times" in str(mutate.stale(gone, tmp_path))
    assert mutate.stale(once, tmp_path) is None


def test_the_runner_kills_a_mutation_and_fails_on_a_survivor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The runner end to end on a scratch copy (the checkout untouched): a mutation of the
    web tools is killed by its test; a mutation its test cannot see (a comment) survives,
    and a survivor fails the run."""
    killed = next(m for m in MUTATIONS if m.row == "000:335")
    blind = Mutation("000:335", killed.file, killed.old, f"{killed.old}  # mutant", killed.tests)
    code = mutate.main(["--no-baseline"], registry=[killed, blind])
    out = capsys.readouterr().out
    assert code == 1
    assert "summary: 2 mutations, 1 killed, 1 survived, 0 errors, 0 stale" in out
