"""AgentSpec is data; build_options() is the one function that turns it into SDK options.

Everything the CLI is told comes from here: which tools exist and which are pre-approved, the
system prompt (Claude Code's own, with the role's instructions appended, never replaced), the
settings sources (none when portable), the plugin dir, the session store, how to resume, and
which program starts the CLI (lifeline.py: on Linux, one that makes it die with flower).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from claude_agent_sdk import ClaudeAgentOptions, SessionStore

from flower.core import lang
from flower.core.lifeline import lifeline
from flower.core.window import default_window

# plugin/ at the root of a source checkout (three levels above this file); a pip install
# ships the same plugin inside the package as flower/plugin (pyproject's force-include).
# Whichever exists wins; is_dir() guards both. The packaged one is asked first: after an
# install, "three levels above" is site-packages, where a `plugin` folder would be foreign.
_SOURCE_PLUGIN = Path(__file__).resolve().parents[2] / "plugin"
_PACKAGED_PLUGIN = Path(__file__).resolve().parents[1] / "plugin"
PLUGIN_DIR = _PACKAGED_PLUGIN if _PACKAGED_PLUGIN.is_dir() else _SOURCE_PLUGIN
"""The plugin in the seeds' language (zh); its English twin is the `en/` folder inside."""


def plugin_dir() -> Path:
    """The plugin in the current language: PLUGIN_DIR, or PLUGIN_DIR/en in English."""
    return PLUGIN_DIR / "en" if lang.current() == "en" else PLUGIN_DIR


# The CLI reports its session state ("running" / "idle") only when asked; Runtime ends a step
# on "idle", which is the one signal that also covers background subagents waking the session.
SESSION_STATE_ENV = {"CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS": "1"}

# The compaction switches flower documents (docs/configuration.md) are flower's: a shell's
# DISABLE_AUTO_COMPACT=1 would remove the safety net behind the handoff. "0" is off to the
# CLI; a CompactPolicy or the spec's own env sets them on purpose.
COMPACT_SWITCHES_OFF = {"DISABLE_AUTO_COMPACT": "0", "DISABLE_COMPACT": "0"}

CompactMode = Literal["auto", "off", "never"]


@dataclass
class CompactPolicy:
    """Whether the CLI's own auto-compact may fire, and at what window.

    The compaction algorithm lives in the CLI binary; only "fire or not" and the window are
    ours to set, through the variables env() returns (verified on this CLI:
    tests/core/test_agent_cli.py):

        "auto"   auto-compact on; `window` (>= 100_000) becomes CLAUDE_CODE_AUTO_COMPACT_WINDOW
        "off"    DISABLE_AUTO_COMPACT=1: no automatic compaction; manual /compact still works
        "never"  DISABLE_COMPACT=1: no compaction of any kind
    """

    mode: CompactMode = "auto"
    window: int | None = None

    def env(self) -> dict[str, str]:
        match self.mode:
            case "auto":
                return {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(self.window)} if self.window else {}
            case "off":
                return {"DISABLE_AUTO_COMPACT": "1"}
            case "never":
                return {"DISABLE_COMPACT": "1", "DISABLE_AUTO_COMPACT": "1"}
        raise ValueError(f"CompactPolicy.mode must be auto, off or never, not {self.mode!r}")


@dataclass
class HandoffPolicy:
    """When a session writes a handoff and a fresh one takes over (instead of compacting)."""

    enabled: bool = True
    window: int = field(default_factory=default_window)
    headroom: int = 50_000
    max_generations: int = 8

    @property
    def at(self) -> int:
        """Context level at which the handoff is due."""
        return max(10_000, self.window - self.headroom)

    @property
    def warn_at(self) -> int:
        """Context level at which the "near" event is emitted (once per generation)."""
        return max(1_000, self.at - 20_000)


@dataclass
class AgentSpec:
    """The complete declaration of one specialised agent.

    Beyond the seeds' fields, `tools` restricts which tools exist at all (the SDK's `tools=`):
    `allowed_tools` only pre-approves, it never hides a tool. Read-only roles set both.
    """

    name: str
    instructions: str
    allowed_tools: list[str] = field(default_factory=lambda: ["Read", "Glob", "Grep"])
    disallowed_tools: list[str] = field(default_factory=list)
    model: str | None = None
    effort: str | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    permission_mode: str = "default"
    agents: dict[str, Any] | None = None
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    hooks: dict[str, Any] | None = None
    compact: CompactPolicy | None = None
    env: dict[str, str] = field(default_factory=dict)
    glance: bool = False
    workbench: bool = True
    delegate_only: bool = False
    tools: list[str] | None = None


def build_options(
    spec: AgentSpec,
    *,
    cwd: str | Path | None = None,
    session_store: SessionStore | None = None,
    resume: str | None = None,
    fork: bool = False,
    resume_at: str | None = None,
    use_plugin: bool = True,
    portable: bool = True,
    add_dirs: list[str] | None = None,
    flush: str = "eager",
    prelude: str = "",
    context: str = "",
) -> ClaudeAgentOptions:
    """Compile an AgentSpec into ClaudeAgentOptions.

    prelude: the seed's keyword (000:484-497): text placed before the instructions in the
    appended system prompt. context: text placed after them (Runtime puts the workbench's
    rules and index there). The workbench's text changes as it fills, and a prompt cache
    keys on the prefix: after the instructions, it leaves them in the cached part, so
    Runtime passes `context`, never `prelude` (docs/decisions.md, issue 35).
    """
    append = "\n\n".join(part for part in (prelude, spec.instructions, context) if part)
    system_prompt: dict[str, Any] = {"type": "preset", "preset": "claude_code"}
    if append:
        system_prompt["append"] = append
    env = {
        **SESSION_STATE_ENV,
        **COMPACT_SWITCHES_OFF,
        **spec.env,
        **(spec.compact.env() if spec.compact else {}),
    }
    if spec.permission_mode == "bypassPermissions" and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"  # the CLI refuses bypassPermissions as root otherwise
    tether = lifeline()  # the CLI dies with this process (Linux; lifeline.py)
    if tether is not None:
        env.update(tether.env)
    plugin = plugin_dir()
    plugins: list[Any] = (
        [{"type": "local", "path": str(plugin)}] if use_plugin and plugin.is_dir() else []
    )
    return ClaudeAgentOptions(
        tools=spec.tools,
        allowed_tools=list(spec.allowed_tools),
        disallowed_tools=list(spec.disallowed_tools),
        system_prompt=system_prompt,  # type: ignore[arg-type]
        mcp_servers=dict(spec.mcp_servers),
        permission_mode=spec.permission_mode,  # type: ignore[arg-type]
        model=spec.model,
        effort=spec.effort,  # type: ignore[arg-type]
        max_turns=spec.max_turns,
        max_budget_usd=spec.max_budget_usd,
        agents=spec.agents,
        hooks=spec.hooks,  # type: ignore[arg-type]
        env=env,
        cli_path=tether.cli_path if tether else None,
        cwd=cwd,
        setting_sources=[] if portable else ["project"],
        plugins=plugins,
        add_dirs=list(add_dirs or []),
        session_store=session_store,
        session_store_flush=flush,  # type: ignore[arg-type]
        resume=resume,
        fork_session=fork,
        resume_session_at=resume_at,
    )
