"""AgentSpec -> ClaudeAgentOptions mapping, and the pure policies beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import flower
from flower.core.agent import (
    COMPACT_SWITCHES_OFF,
    PLUGIN_DIR,
    SESSION_STATE_ENV,
    AgentSpec,
    CompactPolicy,
    HandoffPolicy,
    build_options,
    default_window,
)
from flower.core.lifeline import LAUNCHER, bundled_cli, lifeline
from flower.core.reaper import ENV_CLI, ENV_PARENT


def test_instructions_are_appended_to_claude_codes_prompt_never_replacing_it() -> None:
    options = build_options(AgentSpec("a", "Be terse."), context="INDEX")
    assert options.system_prompt == {
        "type": "preset",
        "preset": "claude_code",
        "append": "Be terse.\n\nINDEX",  # the workbench index, which changes, goes last
    }
    assert build_options(AgentSpec("a", "")).system_prompt == {
        "type": "preset",
        "preset": "claude_code",
    }


def test_portable_means_no_setting_sources() -> None:
    assert build_options(AgentSpec("a", "")).setting_sources == []
    assert build_options(AgentSpec("a", ""), portable=False).setting_sources == ["project"]


PLUGINS_OF_A_COPY = """
import json, sys
import flower.core.agent as agent
assert agent.__file__.startswith(sys.argv[1]), agent.__file__  # the copy, not the checkout
print(json.dumps(agent.build_options(agent.AgentSpec("a", "")).plugins))
"""


@pytest.mark.parametrize("language", ["zh", "en"])
def test_plugin_dir_only_when_present_and_wanted(tmp_path: Path, language: str) -> None:
    options = build_options(AgentSpec("a", ""))
    expected = [{"type": "local", "path": str(PLUGIN_DIR)}] if PLUGIN_DIR.is_dir() else []
    assert options.plugins == expected
    assert build_options(AgentSpec("a", ""), use_plugin=False).plugins == []
    # 000:503, the missing case: flower installed without its plugin folder (neither the
    # packaged flower/plugin nor a source checkout's plugin/ beside it) hands the CLI no
    # plugin, rather than a path that does not exist; the folder's arrival turns it on.
    shutil.copytree(
        Path(str(flower.__file__)).parent,
        tmp_path / "flower",
        ignore=shutil.ignore_patterns("__pycache__", "plugin"),
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "FLOWER_LANG": language}

    def plugins() -> list[dict[str, str]]:
        done = subprocess.run(
            [sys.executable, "-c", PLUGINS_OF_A_COPY, str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=True,
        )
        found: list[dict[str, str]] = json.loads(done.stdout)
        return found

    assert plugins() == []
    folder = tmp_path / "plugin" / "en" if language == "en" else tmp_path / "plugin"
    folder.mkdir(parents=True)
    assert plugins() == [{"type": "local", "path": str(folder)}]


def test_spec_fields_map_one_to_one(tmp_path: Path) -> None:
    spec = AgentSpec(
        "a",
        "",
        allowed_tools=["Read", "Bash"],
        disallowed_tools=["Write"],
        model="claude-sonnet-5-5",
        effort="high",
        max_turns=7,
        max_budget_usd=0.5,
        permission_mode="acceptEdits",
        env={"X": "1"},
        tools=["Read", "Bash"],
    )
    options = build_options(
        spec,
        cwd=tmp_path,
        resume="sid",
        fork=True,
        resume_at="uuid",
        add_dirs=["/x"],
        flush="batched",
    )
    assert (options.allowed_tools, options.disallowed_tools) == (["Read", "Bash"], ["Write"])
    assert (options.model, options.effort, options.max_turns) == ("claude-sonnet-5-5", "high", 7)
    assert (options.max_budget_usd, options.permission_mode) == (0.5, "acceptEdits")
    assert options.tools == ["Read", "Bash"]
    assert (options.resume, options.fork_session, options.resume_session_at) == (
        "sid",
        True,
        "uuid",
    )
    assert (options.cwd, options.add_dirs, options.session_store_flush) == (
        tmp_path,
        ["/x"],
        "batched",
    )
    tether = lifeline()
    assert options.env == {
        **SESSION_STATE_ENV,
        **COMPACT_SWITCHES_OFF,
        "X": "1",
        **(tether.env if tether else {}),
    }


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the lifeline is Linux's")
def test_on_linux_the_cli_is_started_through_the_reaper() -> None:
    options = build_options(AgentSpec("a", ""))
    assert options.cli_path == str(LAUNCHER) and os.access(LAUNCHER, os.X_OK)
    assert options.env[ENV_CLI] == bundled_cli() and options.env[ENV_PARENT] == str(os.getpid())


def test_compact_policy_wins_over_spec_env() -> None:
    spec = AgentSpec("a", "", env={"DISABLE_AUTO_COMPACT": "0"}, compact=CompactPolicy("off"))
    assert build_options(spec).env["DISABLE_AUTO_COMPACT"] == "1"


@pytest.mark.parametrize(
    ("policy", "env"),
    [
        (CompactPolicy(), {}),
        (CompactPolicy(window=300_000), {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "300000"}),
        (CompactPolicy("off"), {"DISABLE_AUTO_COMPACT": "1"}),
        (CompactPolicy("never"), {"DISABLE_COMPACT": "1", "DISABLE_AUTO_COMPACT": "1"}),
    ],
)
def test_compact_policy_env(policy: CompactPolicy, env: dict[str, str]) -> None:
    assert policy.env() == env


def test_unknown_compact_mode_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="auto, off or never"):
        CompactPolicy("sometimes").env()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("", 1_000_000),
        ("claude-opus-5-5", 1_000_000),
        ("claude-sonnet-4-5", 200_000),
        ("claude-sonnet-4-5[1m]", 1_000_000),
        ("claude-haiku-5-5", 200_000),
        ("claude-3-7-sonnet", 200_000),
    ],
)
def test_default_window_from_the_model_name(
    monkeypatch: pytest.MonkeyPatch, model: str, window: int
) -> None:
    monkeypatch.delenv("ANTHROPIC_DEFAULT_OPUS_MODEL", raising=False)
    monkeypatch.setenv("ANTHROPIC_MODEL", model)
    assert default_window() == window


def test_opus_default_is_consulted_when_model_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_MODEL", raising=False)
    monkeypatch.setenv("ANTHROPIC_DEFAULT_OPUS_MODEL", "claude-opus-4-1")
    assert default_window() == 200_000


def test_handoff_thresholds() -> None:
    policy = HandoffPolicy(window=200_000)
    assert (policy.at, policy.warn_at) == (150_000, 130_000)
    tiny = HandoffPolicy(window=30_000)
    assert (tiny.at, tiny.warn_at) == (10_000, 1_000)


def test_bypass_permissions_as_root_sets_is_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    options = build_options(AgentSpec("a", "", permission_mode="bypassPermissions"))
    assert options.env["IS_SANDBOX"] == "1"
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert (
        "IS_SANDBOX"
        not in build_options(AgentSpec("a", "", permission_mode="bypassPermissions")).env
    )


def test_the_seeds_prelude_goes_before_the_instructions_and_context_after() -> None:
    """000:484-497: build_options(spec, prelude=...) is the seed's keyword; `context` (what
    Runtime passes: the workbench's changing text) goes last, for the prompt cache."""
    options = build_options(AgentSpec("a", "RULES"), prelude="PRELUDE", context="INDEX")
    assert options.system_prompt["append"] == "PRELUDE\n\nRULES\n\nINDEX"  # type: ignore[index]
    assert (
        build_options(AgentSpec("a", "RULES"), prelude="P").system_prompt["append"] == "P\n\nRULES"
    )  # type: ignore[index]
