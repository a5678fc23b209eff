"""Conformance with seed 003, the configuration page (003_cf37a06717b6dddc.txt).

Each test states one statement of the page as the seed says it, or, where flower keeps a
deviation, as docs/decisions.md ("Seed conformance (issue 22)") records it. The docstring of
each test names the section of the page.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flower.core.agent import AgentSpec
from flower.core.env import DotenvError, Lookup, load_dotenv, parse_dotenv
from flower.core.runtime import Runtime
from flower.errors import FlowerError
from flower.testing import FakeAPI, sequence, text
from tests.conformance.conftest import write

KEY = "ANTHROPIC_API_KEY"
URL = "ANTHROPIC_BASE_URL"


def test_a_key_repeated_in_one_file_keeps_its_first_value() -> None:
    """003, "Priorité de recherche des credentials": « La première valeur rencontrée pour une
    clé donnée est définitive », inside one file as across files."""
    assert parse_dotenv("A=1\nB=x\nA=2\n") == {"A": "1", "B": "x"}
    assert parse_dotenv("A=\nA=2\n") == {"A": ""}  # an empty value occupies its key too


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
