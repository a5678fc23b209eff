"""The seeds' signatures, written from the seed pages (not from the code): each public
callable and dataclass the pages show, as the page writes its parameters (names, order,
`*`, defaults; annotations left out, the pages' types being prose more than checks), with
the page and line it is on. Defaults are written as their repr; `<factory>` is a field's
default_factory; a bare NAME is one of the seeds' constants (CONSTANTS).

test_signatures.py compares flower's code with this table: a name the seeds show must
have exactly these parameters, or be listed in DEVIATIONS with the parameters flower has
instead and the docs/decisions.md entry that records why.
"""

from __future__ import annotations

import inspect
from typing import Any

SEED: dict[str, tuple[str, list[str]]] = {
    "AgentSpec": (
        "000:463",
        [
            "name",
            "instructions",
            "allowed_tools=<factory>",
            "disallowed_tools=<factory>",
            "model=None",
            "effort=None",
            "max_turns=None",
            "max_budget_usd=None",
            "permission_mode='default'",
            "agents=None",
            "mcp_servers=<factory>",
            "hooks=None",
            "compact=None",
            "env=<factory>",
            "glance=False",
            "workbench=True",
            "delegate_only=False",
        ],
    ),
    "Ask": (
        "004:233",
        ["id", "question", "options=<factory>", "asked_at=<factory>", "state='asked'", "answer=''"],
    ),
    "Ask.event": ("004:243", ["remaining=0"]),
    "Ask.waited_s": ("004:242", []),
    "Brief": ("000:549", ["goal=''", "accept=''", "bounds=''", "unknowns=''", "path=None"]),
    "CompactPolicy": ("000:508", ["mode='auto'", "window=None"]),
    "CompactPolicy.env": ("000:512", []),
    "EphemeralPolicy": (
        "000:798",
        [
            "enabled=True",
            "keep_recent=6",
            "max_chars=2000",
            "text='[{cmd} 的结果已过期(第 {age} 轮前),当前状态可能已变。需要请重新执行]'",
        ],
    ),
    "Event": ("004:203", ["kind", "text=''", "tool=''", "payload=<factory>", "raw=None"]),
    "Goal": ("000:587", ["statement=''", "checks=<factory>", "path=None"]),
    "Handoff": (
        "000:569",
        ["doing=''", "decided=''", "deadends=''", "next=''", "scene=''", "step=''", "path=None"],
    ),
    "HandoffPolicy": (
        "000:519",
        ["enabled=True", "window=<factory>", "headroom=50000", "max_generations=8"],
    ),
    "HandoffPolicy.at": ("000:526", []),
    "HandoffPolicy.warn_at": ("000:528", []),
    "HumanChannel": (
        "004:247",
        [
            "*",
            "on_event=None",
            "max_asks=None",
            "timeout_s=1800.0",
            "log_path=None",
            "amend_path=None",
            "over_budget_text=OVER_BUDGET",
            "timeout_text=TIMEOUT",
            "declined_text=DECLINED",
        ],
    ),
    "PruningSessionStore": (
        "003:216",
        ["path", "workspace", "policy=None", "prune=None", "ephemeral=None"],
    ),
    "Runtime": (
        "000:25",
        [
            "*",
            "workspace",
            "run_dir='runs'",
            "portable=True",
            "trim=False",
            "ephemeral=True",
            "keep_denials=1",
            "workbench=False",
            "spill_threshold=4000",
            "resilience=True",
            "handoff=True",
        ],
    ),
    "Runtime.run": (
        "000:53",
        [
            "spec",
            "prompt",
            "*",
            "step_name=None",
            "resume=None",
            "fork=False",
            "resume_at=None",
            "on_event=None",
        ],
    ),
    "SqliteSessionStore": ("000:778", ["path"]),
    "Step": (
        "000:112",
        [
            "name",
            "spec",
            "prompt",
            "resume_from=None",
            "fork=False",
            "retries=0",
            "gate=None",
            "on_fail='stop'",
            "when=None",
            "on_reject=None",
            "resume_prompt=None",
            "reduce=None",
        ],
    ),
    "StepResult": (
        "000:83",
        [
            "step",
            "session_id=None",
            "ok=False",
            "cost_usd=0.0",
            "num_turns=0",
            "text=''",
            "error=None",
            "started_at=0.0",
            "ended_at=0.0",
            "attempts=1",
            "errors=<factory>",
            "resumed=False",
            "retired=<factory>",
            "context=0",
        ],
    ),
    "TrimPolicy": (
        "000:787",
        ["keep_recent=20", "min_chars=2000", "spill_dirname='.flower/spill'", "enabled=True"],
    ),
    "TrimmingSessionStore": ("000:831", ["path", "workspace", "policy=None", "ephemeral=None"]),
    "Verdict": ("000:597", ["state=''", "reason=''", "failed=<factory>"]),
    "Workbench": (
        "000:747",
        ["workspace", "dirname='.flower'", "max_index_entries=40", "home=None"],
    ),
    "Workflow": (
        "000:146",
        [
            "steps",
            "name='workflow'",
            "context=<factory>",
            "channel=None",
            "workbench=None",
            "continuous=True",
        ],
    ),
    "Workflow.run": ("000:154", ["runtime", "*", "on_event=None", "on_step=None"]),
    "build_options": (
        "000:484",
        [
            "spec",
            "*",
            "cwd=None",
            "session_store=None",
            "resume=None",
            "fork=False",
            "resume_at=None",
            "use_plugin=True",
            "portable=True",
            "add_dirs=None",
            "flush='eager'",
            "prelude=''",
        ],
    ),
    "clarify": (
        "000:398",
        [
            "name",
            "channel",
            "*",
            "instructions=''",
            "can_read=True",
            "model=None",
            "effort=None",
            "max_turns=None",
            "max_budget_usd=None",
        ],
    ),
    "clarify_step": (
        "000:184",
        [
            "channel",
            "*",
            "brief_path",
            "prompt",
            "name='确认需求'",
            "spec=None",
            "instructions=''",
            "always_ask=False",
            "on_fail='stop'",
            "retries=0",
            "**spec_kw",
        ],
    ),
    "coordinator": (
        "000:340",
        [
            "name",
            "instructions",
            "workers",
            "*",
            "channel=None",
            "can_read=True",
            "glance=True",
            "model=None",
            "effort=None",
            "max_turns=None",
            "max_budget_usd=None",
            "permission_mode='acceptEdits'",
            "compact=None",
            "hooks=None",
            "env=None",
        ],
    ),
    "default_window": ("000:534", []),
    "delegate_guard": ("000:651", ["*", "tools=HANDS_ON", "allow_glance=False"]),
    "goal_step": (
        "000:212",
        [
            "channel",
            "*",
            "goal_path",
            "brief_key='确认需求'",
            "name='设定目标'",
            "spec=None",
            "instructions=''",
            "always_set=False",
            "on_fail='stop'",
            "retries=0",
            "**spec_kw",
        ],
    ),
    "index_guard": ("000:682", ["workbench"]),
    "is_ephemeral": ("000:810", ["cmd"]),
    "isolate_guard": ("000:690", ["agents", "*", "on_inject=None"]),
    "isolated": ("000:702", ["agent", "flag=True"]),
    "judge": (
        "000:416",
        [
            "name",
            "channel",
            "*",
            "instructions=''",
            "can_run=False",
            "model=None",
            "effort=None",
            "max_turns=None",
            "max_budget_usd=None",
        ],
    ),
    "merge_hooks": ("000:734", ["*groups"]),
    "oracle": (
        "000:436",
        [
            "name='旁路问答'",
            "*",
            "instructions=''",
            "model=None",
            "effort=None",
            "max_turns=12",
            "max_budget_usd=0.5",
        ],
    ),
    "spill_guard": (
        "000:665",
        ["workbench", "*", "threshold=4000", "tools=BULKY", "main_only=False"],
    ),
    "starter_flow": (
        "000:272",
        [
            "ask",
            "*",
            "workspace='.'",
            "run_dir='runs'",
            "new=False",
            "isolate=False",
            "clarify_only=False",
            "goal=True",
            "rounds=3",
            "judge_can_run=False",
            "max_asks=None",
            "timeout_s=1800.0",
            "instructions=''",
            "worker_prompt='你负责实现。每改一处就跑一次验证,别攒到最后。'",
            "brief_name='需求.md'",
            "goal_name='目标.md'",
            "log_name='问答记录.md'",
        ],
    ),
    "wake_state": (
        "000:309",
        [
            "workspace='.'",
            "*",
            "run_dir='runs'",
            "isolate=False",
            "brief_name='需求.md'",
            "goal_name='目标.md'",
        ],
    ),
    "wants_isolation": ("000:703", ["agent"]),
    "whitelist_guard": ("000:636", ["allowed", "*", "role='这个角色'"]),
    "with_goal": (
        "000:236",
        [
            "step",
            "channel",
            "*",
            "goal_path",
            "spec=None",
            "rounds=3",
            "instructions=''",
            "can_run=False",
            "name=None",
            "**spec_kw",
        ],
    ),
    "workbench_hooks": (
        "000:715",
        [
            "workbench",
            "*",
            "delegate_only=True",
            "spill_threshold=4000",
            "agents=None",
            "allow_glance=False",
        ],
    ),
    "worker": (
        "000:378",
        [
            "description",
            "prompt",
            "*",
            "tools=None",
            "model='inherit'",
            "effort=None",
            "max_turns=None",
            "permission_mode=None",
            "skills=None",
            "discipline=True",
            "isolate=False",
        ],
    ),
}

LANGUAGE = "decisions.md, English by default (issue 21, item 6): a seed text default is None"

# name -> (flower's parameters instead, why: the docs/decisions.md entry that records it)
DEVIATIONS: dict[str, tuple[list[str], str]] = {
    "AgentSpec": (
        [*SEED["AgentSpec"][1], "tools=None"],
        "decisions.md, AgentSpec.tools: the SDK's tools= (what the session has at all)",
    ),
    "Ask": (
        [*SEED["Ask"][1], "closed_at=None"],
        "decisions.md, issue 35: waited_s stops counting when the ask is answered or closed",
    ),
    "HumanChannel": (
        [
            *SEED["HumanChannel"][1][:6],
            "over_budget_text=None",
            "timeout_text=None",
            "declined_text=None",
        ],
        LANGUAGE,
    ),
    "Runtime": (
        [*SEED["Runtime"][1], "budget_usd=None"],
        "decisions.md, --budget: a run-wide cap, Runtime(budget_usd=...)",
    ),
    "StepResult": (
        [*SEED["StepResult"][1], "usage=<factory>"],
        "decisions.md: StepResult.usage is new (the documented fields stay)",
    ),
    "TrimPolicy": (
        [
            *SEED["TrimPolicy"][1],
            "pointer='[工具结果已归档:{chars} 字符。完整内容在 {path},需要时用 Read 读取]'",
        ],
        "decisions.md, the stores' replacement lines: TrimPolicy.pointer, in each language",
    ),
    "Verdict": (
        [*SEED["Verdict"][1], "path=None"],
        "decisions.md, issue 22: Goal.path is compare=False, and Verdict has path too",
    ),
    "build_options": (
        [*SEED["build_options"][1], "context=''"],
        "decisions.md, issue 35: prelude before the instructions, context after (prompt cache)",
    ),
    "delegate_guard": (
        [*SEED["delegate_guard"][1], "workbench=None"],
        "decisions.md, issue 22: delegate_guard(..., workbench=None) names the real artifacts/",
    ),
    "oracle": (["name=None", *SEED["oracle"][1][1:]], LANGUAGE),
    "starter_flow": (
        [
            p if not p.startswith("worker_prompt=") else "worker_prompt=None"
            for p in SEED["starter_flow"][1]
        ],
        LANGUAGE,
    ),
    "whitelist_guard": (["allowed", "*", "role=None"], LANGUAGE),
}


def constants() -> dict[str, str]:
    """The seeds' constants a default may name, as flower defines them."""
    from flower.core import guard, human

    return {
        "HANDS_ON": guard.HANDS_ON,
        "BULKY": guard.BULKY,
        "OVER_BUDGET": human.OVER_BUDGET,
        "TIMEOUT": human.TIMEOUT,
        "DECLINED": human.DECLINED,
    }


def resolve(name: str) -> Any:
    """`NAME` or `Class.member` of the top-level `flower` package."""
    import flower

    head, _, member = name.partition(".")
    found = getattr(flower, head)
    return getattr(found, member) if member else found


def parameters(function: Any) -> list[str]:
    """`function`'s parameters written as the table writes them (a property has none)."""
    if isinstance(function, property):
        return []
    named = constants()
    written: list[str] = []
    star = False
    for p in inspect.signature(function).parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.VAR_POSITIONAL:
            written.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            written.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                written.append("*")
                star = True
            written.append(
                p.name if p.default is p.empty else f"{p.name}={_shown(p.default, named)}"
            )
    return written


def _shown(default: Any, named: dict[str, str]) -> str:
    if repr(default) == "<factory>":
        return "<factory>"
    return next(
        (k for k, v in named.items() if isinstance(default, str) and v == default), repr(default)
    )


def seed_drift() -> list[str]:
    """Each name whose parameters are neither the seed's nor its recorded deviation's."""
    found = []
    for name, (where, seed) in SEED.items():
        expected = DEVIATIONS[name][0] if name in DEVIATIONS else seed
        if (ours := parameters(resolve(name))) != expected:
            found.append(f"{name} ({where}): expected {expected}, flower has {ours}")
    return found
