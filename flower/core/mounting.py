"""What an AgentSpec becomes when a Runtime runs it: its guards mounted (docs/guards.md), the
worktree hooks of its isolated workers (flower.core.worktrees) and its environment completed
(resilience, the spill's output cap, the CLI's compaction line). Pure functions of the spec
and the Runtime's policies: the same inputs, the same session.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flower.core.agent import AgentSpec, HandoffPolicy
from flower.core.guard import (
    merge_hooks,
    role_hooks,
    wants_isolation,
    whitelist_guard,
    workbench_hooks,
)
from flower.core.resilience import Resilience
from flower.core.workbench import Workbench
from flower.core.worktrees import Worktrees

__all__ = ["CLI_COMPACT_BELOW_WINDOW", "HANDOFF_LEAD", "SPILL_ENV", "guards", "session_spec"]

# The CLI cuts Bash output at 30,000 chars before hooks see it, then persists it itself and
# ignores the spill guard's replacement. Raised to the CLI's own cap (150,000) the hook gets
# the whole output and its pointer is what the model sees; beyond that the CLI's
# <persisted-output> stands. Verified in tests/core/test_guard_cli.py.
SPILL_ENV = {"BASH_MAX_OUTPUT_LENGTH": "150000"}

# The CLI auto-compacts at its window minus ~33,000 tokens (measured: 167k of 200k, 367k of
# 400k). Given the handoff window, and never less than this above flower's handoff line,
# the CLI's compaction stays a safety net behind the handoff (DESIGN.md, Decisions).
CLI_COMPACT_BELOW_WINDOW = 33_000
HANDOFF_LEAD = 10_000


def session_spec(
    spec: AgentSpec,
    *,
    workbench: Workbench | None,
    spill_threshold: int | None,
    resilience: Resilience,
    handoff: HandoffPolicy,
    worktrees: Worktrees | None = None,
) -> AgentSpec:
    """`spec` as a Runtime runs it; the spec's own env entries win over the Runtime's.
    `worktrees` makes the worktrees of the spec's isolated workers, if it has any."""
    spills = bool(spill_threshold and spec.workbench and workbench is not None)
    env = {
        **resilience.env(),
        **(SPILL_ENV if spills else {}),
        **_compaction_env(spec, handoff),
        **spec.env,
    }
    hooks = guards(spec, workbench=workbench, spill_threshold=spill_threshold)
    isolates = any(wants_isolation(agent) for agent in (spec.agents or {}).values())
    if worktrees is not None and isolates:
        hooks = merge_hooks(hooks, worktrees.hooks())
    return replace(spec, hooks=hooks, env=env)


def guards(
    spec: AgentSpec, *, workbench: Workbench | None, spill_threshold: int | None
) -> dict[str, list[Any]]:
    """The hooks mounted for `spec`: the workbench's set when it uses one, the role's
    otherwise, and the tool whitelist unless the spec only delegates."""
    if workbench is not None and spec.workbench:
        mounted: dict[str, list[Any]] = workbench_hooks(
            workbench,
            delegate_only=spec.delegate_only,
            spill_threshold=spill_threshold,
            agents=spec.agents,
            allow_glance=spec.glance,
        )
    else:
        pre = role_hooks(
            delegate_only=spec.delegate_only, allow_glance=spec.glance, agents=spec.agents
        )
        mounted = {"PreToolUse": pre} if pre else {}
    wall = None if spec.delegate_only else whitelist_guard(spec.allowed_tools, role=spec.name)
    return merge_hooks(spec.hooks, mounted, {"PreToolUse": [wall]} if wall else None)


def _compaction_env(spec: AgentSpec, handoff: HandoffPolicy) -> dict[str, str]:
    """Put the CLI's auto-compact line above the handoff line (unless the spec set its own
    CompactPolicy, or handoff is off and the CLI's default stands)."""
    if spec.compact is not None or not handoff.enabled:
        return {}
    window = max(handoff.window, handoff.at + CLI_COMPACT_BELOW_WINDOW + HANDOFF_LEAD)
    return {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(window)}
