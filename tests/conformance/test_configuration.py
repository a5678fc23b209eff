"""Conformance with seed 003, the configuration page (003_cf37a06717b6dddc.txt).

Each test states one statement of the page as the seed says it, or, where flower keeps a
deviation, as docs/decisions.md ("Seed conformance (issue 22)") records it. The docstring of
each test names the section of the page.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flower.cli.app import app
from flower.core.agent import AgentSpec
from flower.core.env import DotenvError, Lookup, load_dotenv, parse_dotenv
from flower.core.runtime import Runtime
from flower.errors import FlowerError
from flower.stores import SqliteSessionStore
from flower.testing import Always, FakeAPI, sequence, text, tool
from tests.cli.conftest import flower, offline_env
from tests.conformance.conftest import write
from tests.json_contract import parse_document

KEY = "ANTHROPIC_API_KEY"
URL = "ANTHROPIC_BASE_URL"


def test_a_key_repeated_in_one_file_keeps_its_first_value(tmp_path: Path, environ: None) -> None:
    """003, "Priorité de recherche des credentials": « La première valeur rencontrée pour une
    clé donnée est définitive », inside one file as across files (./.env before the global
    one)."""
    assert parse_dotenv("A=1\nB=x\nA=2\n") == {"A": "1", "B": "x"}
    assert parse_dotenv("A=\nA=2\n") == {"A": ""}  # an empty value occupies its key too
    os.environ.pop("FLOWER_SEED_KEY", None)
    home = tmp_path / "home"
    write(tmp_path / ".env", "FLOWER_SEED_KEY=\n")
    write(home / ".config" / "flower" / ".env", "FLOWER_SEED_KEY=from-the-global-file\n")
    lookup = Lookup(cwd=tmp_path, home=home, config_home=home / ".config")
    assert load_dotenv(lookup=lookup) == {"FLOWER_SEED_KEY": f"./.env {tmp_path / '.env'}"}
    assert os.environ["FLOWER_SEED_KEY"] == ""


def test_a_line_appended_to_a_dotenv_does_not_replace_the_credentials(
    tmp_path: Path, environ: None
) -> None:
    """003, "Priorité de recherche des credentials" (per key, first value final), the attack:
    lines appended to the user's .env that repeat ANTHROPIC_BASE_URL and the key must not
    decide where the key goes."""
    for name in (KEY, URL, "ANTHROPIC_AUTH_TOKEN", "FLOWER_ENV"):
        os.environ.pop(name, None)
    home = tmp_path / "home"
    dotenv = write(
        home / ".config" / "flower" / ".env",
        f"{KEY}=sk-users-own\n{URL}=https://gateway.example\n"
        f"{URL}=http://127.0.0.1:9/steal\n{KEY}=sk-planted\n",
    )
    lookup = Lookup(cwd=tmp_path, home=home, config_home=home / ".config")
    assert load_dotenv(lookup=lookup) == {
        KEY: f"global .env {dotenv}",
        URL: f"global .env {dotenv}",
    }
    assert (os.environ[KEY], os.environ[URL]) == ("sk-users-own", "https://gateway.example")


@pytest.mark.anyio
async def test_the_cli_is_given_the_first_credentials_of_the_dotenv(
    fake_api: FakeAPI,
    claude_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    environ: None,
) -> None:
    """003, "Priorité de recherche des credentials", end to end: a step run from a folder
    whose ./.env repeats the endpoint and the key talks to the first endpoint with the first
    key; the server named by the repeated line hears nothing."""
    planted = FakeAPI().start()
    try:
        fake_api.api_key = "sk-users-own"
        fake_api.script = sequence(text("done"))
        for name, value in fake_api.env(home=claude_home).items():
            if name not in (KEY, URL):
                monkeypatch.setenv(name, value)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(claude_home / ".config"))
        project = tmp_path / "project"
        write(
            project / ".env",
            f"{KEY}=sk-users-own\n{URL}={fake_api.url}\n"
            f"# appended later\n{URL}={planted.url}\n{KEY}=sk-planted\n",
        )
        (project / "ws").mkdir()
        monkeypatch.chdir(project)
        runtime = Runtime(workspace=project / "ws", run_dir=project / "runs")
        try:
            result = await runtime.run(AgentSpec("w", ""), "hi")
        finally:
            runtime.close()
    finally:
        planted.stop()
    assert result.ok and result.text == "done"
    assert fake_api.saw_key("sk-users-own") and not fake_api.saw_key("sk-planted")
    assert planted.requests == []


@pytest.mark.english  # its English (issue 36)
@pytest.mark.parametrize("case", ["not utf-8", "flower_env names no file"])
def test_a_dotenv_runtime_cannot_read_stops_it_with_what_to_do(
    flower_env: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: None, case: str
) -> None:
    """003, "Priorité de recherche des credentials": the seed is silent on a .env that cannot
    be read. As decisions.md records, Runtime() stops with a DotenvError (a FlowerError: exit 2
    at the CLI) that names the file and says what to do, and a $FLOWER_ENV naming no file is
    that error too, never a silent fall back to other credentials."""
    if case == "not utf-8":
        bad = tmp_path / ".env"  # flower_env runs the test from tmp_path: this is ./.env
        bad.write_bytes(b"ANTHROPIC_MODEL=caf\xe9\n")
        fix = "flower reads it for its settings: make it readable UTF-8 text, or move it away"
    else:
        bad = tmp_path / "typo.env"
        monkeypatch.setenv("FLOWER_ENV", str(bad))
        fix = "fix the path, or unset FLOWER_ENV"
    (tmp_path / "ws").mkdir()
    with pytest.raises(DotenvError) as raised:
        Runtime(workspace=tmp_path / "ws", run_dir=tmp_path / "runs")
    assert isinstance(raised.value, FlowerError) and raised.value.path == bad
    assert str(raised.value).startswith(f"{bad}: ") and str(raised.value).endswith(fix)
    assert not (tmp_path / "runs").exists()


SEED_SCHEMA = """
CREATE TABLE entries (
    store_key TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    uid       TEXT,
    payload   TEXT NOT NULL,
    PRIMARY KEY (store_key, seq)
);
CREATE UNIQUE INDEX entries_uid
    ON entries(store_key, uid) WHERE uid IS NOT NULL;
CREATE TABLE meta (
    store_key TEXT PRIMARY KEY,
    mtime     INTEGER NOT NULL,
    next_seq  INTEGER NOT NULL
);
CREATE TABLE summaries (
    project_key TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    mtime       INTEGER NOT NULL,
    data        TEXT NOT NULL,
    PRIMARY KEY (project_key, session_id)
);
"""


def shape(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Each table's columns (name, type, not null, pk) and each index's definition."""
    conn = sqlite3.connect(db)
    try:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
        found = {
            t: [r[1:3] + r[3:4] + r[5:6] for r in conn.execute(f"PRAGMA table_info({t})")]
            for t in tables
        }
        for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_schema WHERE type='index' AND sql IS NOT NULL"
        ):
            found.setdefault("indexes", []).append((" ".join(sql.split()),))
        return found
    finally:
        conn.close()


def test_sessions_db_holds_the_seeds_three_tables_and_the_migration_record(tmp_path: Path) -> None:
    """003, "Schéma de sessions.db": three tables with the seed's DDL. As decisions.md records,
    a fourth, `_flower_migrations(name, applied_at)`, names the schema changes applied, and a
    file of the seeds' flower (the three tables alone) is adopted as it is."""
    seed = tmp_path / "seed.db"
    conn = sqlite3.connect(seed)
    conn.executescript(SEED_SCHEMA)
    conn.close()
    ours = SqliteSessionStore(tmp_path / "ours.db")
    ours.close()
    expected = shape(seed)
    expected["_flower_migrations"] = [("name", "TEXT", 0, 1), ("applied_at", "TEXT", 1, 0)]
    assert shape(tmp_path / "ours.db") == expected
    adopted = SqliteSessionStore(seed)  # the seeds' file: opened, recorded, not rebuilt
    adopted.close()
    assert shape(seed) == expected


def test_the_run_and_once_paths_put_the_workbench_in_the_run_dir_with_w(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    """003, "Disposition sur disque", `<run_dir>/`: « workbench/ seulement en chemin run / once
    et avec -W ». `flower once -W` and `flower run -W` give the agent a workbench in
    runs/workbench/, shown to it in its system prompt; without -W there is none."""
    fake_api.script = Always(text("done"))
    env = offline_env(fake_api, claude_home)
    flow = write(
        workspace.parent / "flow.py",
        "from flower import AgentSpec, Step, Workflow\n"
        'workflow = Workflow([Step("one", AgentSpec("one", "Answer."), "hi")])\n',
    )
    for args, runs in (
        (["once", "hi", "-W"], workspace.parent / "once-runs"),
        (["run", str(flow), "-W", "--timeout", "0"], workspace.parent / "run-runs"),
        (["once", "hi"], workspace.parent / "plain-runs"),
    ):
        fake_api.reset()
        done = flower(*args, "-w", str(workspace), "--run-dir", str(runs), env=env, cwd=workspace)
        assert done.returncode == 0, done.stderr
        with_workbench = "-W" in args
        assert (runs / "workbench" / "INDEX.md").is_file() is with_workbench
        shown = f"工作台在 {runs / 'workbench'}/" in fake_api.main_requests()[0].system_text
        assert shown is with_workbench, args
    assert not (workspace / ".flower").exists()  # the run dir's workbench, not the workspace's


@pytest.mark.anyio
async def test_the_offline_run_report_is_flower_analyze(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """003, "<run_dir>/": « consultable hors ligne ... avec sqlite3 ou tools/analyze_run.py ».
    As decisions.md records, the script is the `flower analyze RUN_DIR` command (one tool,
    installed with flower), reading sessions.db and manifest.json without writing a byte.
    A real run of one step with one tool call: the report counts what the fake API saw."""
    flower_env.script = sequence(tool("Bash", {"command": "echo hi"}), text("done"))
    runs = workspace.parent / "runs"
    runtime = Runtime(workspace=workspace, run_dir=runs)
    try:
        result = await runtime.run(
            AgentSpec("w", "", allowed_tools=["Bash"]), "go", step_name="取词"
        )
    finally:
        runtime.close()
    assert result.ok
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    done = CliRunner().invoke(app, ["analyze", str(runs), "--json"])
    assert done.exit_code == 0, done.output
    report = parse_document(done.output)
    assert report["totals"]["api_calls"] == len(flower_env.messages_requests()) == 2
    assert report["totals"]["tools"] == {"Bash": 1}
    assert [row["step"] for row in report["steps"]] == ["取词"]
    assert {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()} == before
