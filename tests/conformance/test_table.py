"""docs/conformance.md, the seeds' statements each mapped to a test (issue 35), is kept
honest: every test it names exists, every deviation or silence it names is in
docs/decisions.md, and the counts it states are its rows'."""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "conformance.md"
DECISIONS = ROOT / "docs" / "decisions.md"
SIG = (
    "conformance/test_signatures.py::"
    "test_every_signature_the_seeds_show_is_the_seeds_or_a_recorded_deviation"
)
ROW = re.compile(r"^\| (\d{3}:\d+(?:-\d+)?) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \|$")


@dataclass(frozen=True)
class Row:
    id: str
    statement: str
    test: str
    state: str


def rows(text: str) -> list[Row]:
    """The statement rows of the page (the mutation table's rows have no page:line id)."""
    found = []
    for line in text.splitlines():
        if m := ROW.match(line):
            test = m[4].strip("`")
            found.append(Row(m[1], m[2], SIG if test == "SIG" else test, m[5]))
    return found


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def problems(text: str, decisions: str, tests: Path) -> list[str]:
    """What is wrong with the table `text`: tests that do not exist, records decisions.md
    lacks, counts that are not the rows'."""
    found: list[str] = []
    table = rows(text)
    cache: dict[Path, set[str]] = {}
    for row in table:
        if row.state.startswith("open"):  # a statement with no test yet, and why
            if row.test != "—" or not row.state.startswith("open: "):
                found.append(f"{row.id}: an open row names no test and says why")
            continue
        file, _, name = row.test.partition("::")
        path = tests / file
        if not name or not path.is_file():
            found.append(f"{row.id}: no such test file {row.test!r}")
            continue
        if name not in cache.setdefault(path, defined_tests(path)):
            found.append(f"{row.id}: {file} defines no {name}")
        kind = row.state.split(":")[0]
        if kind not in ("seed", "dev", "silent"):
            found.append(f"{row.id}: state {row.state!r} is none of seed, dev, silent, open")
        elif kind != "seed":
            quoted = re.findall(r'"([^"]+)"', row.state)
            if not quoted or not row.state.startswith(f"{kind}: decisions.md "):
                found.append(f"{row.id}: a {kind} row names its decisions.md entry in quotes")
            plain = decisions.replace("`", "").replace("*", "")
            found += [f"{row.id}: decisions.md has no {q!r}" for q in quoted if q not in plain]
    states = Counter(row.state.split(":")[0] for row in table)
    stated = re.search(
        r"\*\*Counts: (\d+) statements; (\d+) mapped to a test; (\d+) remains?\.\*\* "
        r"Of the mapped, (\d+) are the seed as written, (\d+) deviate .*?, (\d+) are where",
        " ".join(text.split()),
    )
    mapped = len(table) - states["open"]
    actual = (len(table), mapped, states["open"], states["seed"], states["dev"], states["silent"])
    if stated is None or tuple(int(n) for n in stated.groups()) != actual:
        found.append(
            "the counts line should say {} statements; {} mapped; {} remain; {} seed, {} dev, "
            "{} silent".format(*actual)
        )
    return found


def test_every_row_names_a_test_that_exists_and_a_record_that_does() -> None:
    """docs/conformance.md as committed."""
    text = TABLE.read_text(encoding="utf-8")
    assert problems(text, DECISIONS.read_text(encoding="utf-8"), ROOT / "tests") == []
    table = rows(text)
    assert len(table) >= 240  # the pages' ~242 statements, none dropped silently


def test_the_table_check_can_fail() -> None:
    """A renamed test, a record decisions.md lacks, a count off by one: each is caught."""
    text = TABLE.read_text(encoding="utf-8")
    decisions = DECISIONS.read_text(encoding="utf-8")
    tests = ROOT / "tests"
    renamed = text.replace("::test_classify` |", "::test_classify_renamed` |", 1)
    assert problems(renamed, decisions, tests) == [
        "003:257: core/test_resilience.py defines no test_classify_renamed"
    ]
    unrecorded = text.replace('"The roles\' tool groups"', '"A record nobody wrote"', 1)
    assert any(
        "decisions.md has no 'A record nobody wrote'" in p
        for p in problems(unrecorded, decisions, tests)
    )
    first = rows(text)[0]
    dropped = "\n".join(
        line
        for line in text.splitlines()
        if not line.startswith(f"| {first.id} | {first.statement} |")
    )
    assert any(p.startswith("the counts line") for p in problems(dropped, decisions, tests))


@pytest.mark.parametrize("state", ["seed", "dev", "silent"])
def test_each_state_is_in_use(state: str) -> None:
    assert state in Counter(
        row.state.split(":")[0] for row in rows(TABLE.read_text(encoding="utf-8"))
    )
