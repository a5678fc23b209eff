"""Every state file of a run dir is checked before any paid step: a corrupt one is exit 2
with one sentence naming the file and the fix, no traceback, and not a request sent."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flower.testing import FakeAPI, starter_cast
from tests.cli.conftest import flower

GARBAGE = b"{garbage"


def corrupt_database(path: Path) -> None:
    """A real SQLite file whose pages no longer check out (a torn write, a bad disk)."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    conn.close()
    data = bytearray(path.read_bytes())
    data[4096 * 2 : 4096 * 2 + 64] = b"\xff" * 64  # scribble over a b-tree page header
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("manifest.json", GARBAGE, "manifest.json is not valid JSON"),
        ("manifest.json", b'{"a": 1}', "manifest.json holds a JSON dict, not a list of rows"),
        ("manifest.json", b"[1, 2]", "manifest.json holds a row that is not a JSON object"),
        ("lineage.json", GARBAGE, "lineage.json is not valid JSON"),
        ("asks.json", GARBAGE, "asks.json is not valid JSON"),
        ("progress.json", GARBAGE, "progress.json is not valid JSON"),
        ("sessions.db", GARBAGE * 100, "sessions.db: is not a SQLite database"),
        ("sessions.db", None, "sessions.db: is not a SQLite database (database disk image"),
    ],
)
@pytest.mark.parametrize("command", [["go", "做个 hello.py", "--timeout", "0"], ["once", "hi"]])
@pytest.mark.english
def test_a_corrupt_state_file_stops_the_run_before_any_paid_step(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    command: list[str],
    name: str,
    content: bytes | None,
    said: str,
) -> None:
    fake_api.script = starter_cast()
    runs = workspace.parent / "runs"
    runs.mkdir()
    if content is None:
        corrupt_database(runs / name)
    else:
        (runs / name).write_bytes(content)
    before = (runs / name).read_bytes()
    done = flower(*command, "-w", str(workspace), env=cli_env, cwd=workspace.parent)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "Traceback" not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert fake_api.requests == []
    assert (runs / name).read_bytes() == before  # left untouched for the user to look at
