"""flower: long-horizon work with Claude Code through claude-agent-sdk.

    from flower import Runtime, Workflow, Step, coordinator, worker

The public names (the seeds' 62, plus the error base and what flowerbox needs, issue 18) load
on first use (PEP 562), so `import flower` (and the CLI's `--help`) does not pay for
importing the SDK. docs/decisions.md lists how the seeds' lost list of names was settled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flower.exports import lazy_exports

__version__ = "0.2.0"

_HOMES = {
    "flower.core.agent": (
        "PLUGIN_DIR",
        "AgentSpec",
        "CompactPolicy",
        "HandoffPolicy",
        "build_options",
    ),
    "flower.core.window": ("default_window",),
    "flower.core.brief": ("Brief",),
    "flower.core.env": (
        "CREDENTIALS",
        "Lookup",
        "check_credentials",
        "describe",
        "load_dotenv",
        "parse_dotenv",
    ),
    "flower.core.bundled": ("cli_version",),
    "flower.core.event": ("Event", "EventKind"),
    "flower.core.events": ("normalize",),
    "flower.core.exclude": ("git_exclude", "git_unexcluded"),
    "flower.core.goal": ("Goal", "Verdict"),
    "flower.core.guard": (
        "delegate_guard",
        "index_guard",
        "isolate_guard",
        "isolated",
        "merge_hooks",
        "spill_guard",
        "wants_isolation",
        "whitelist_guard",
        "workbench_hooks",
    ),
    "flower.core.handoff": ("Handoff",),
    "flower.core.human": ("DECLINED", "OVER_BUDGET", "TIMEOUT", "Ask", "HumanChannel"),
    "flower.core.lang": ("LANG_ENV", "text", "word"),
    "flower.core.lineage": ("Lineage",),
    "flower.core.pricing": ("DEFAULT_PRICES", "Price", "PriceTable", "token_count"),
    "flower.core.resilience": ("Resilience", "classify"),
    "flower.core.roles": (
        "CLARIFY_RULES",
        "COORDINATOR_RULES",
        "JUDGE_RULES",
        "ORACLE_RULES",
        "WORKER_RULES",
        "clarify",
        "coordinator",
        "judge",
        "oracle",
        "worker",
    ),
    "flower.core.inbox": ("ANSWER_COMMAND_ENV",),
    "flower.core.rundir": ("RUN_ID_ENV", "RunDir", "new_run_id"),
    "flower.core.runtime": ("Runtime", "StepResult"),
    "flower.core.statefile": ("StateFileError", "atomic_write_json", "read_json", "update_json"),
    "flower.core.otlp": (
        "check_traces",
        "export_trace",
        "trace_content_wanted",
        "traces_wanted",
    ),
    "flower.core.timeline": ("Timeline", "read_timeline"),
    "flower.core.trace": ("MeteredCall", "build_trace", "read_event_lines", "read_run_rows"),
    "flower.core.times": ("iso_utc",),
    "flower.core.untrusted": (
        "PrintableStream",
        "UntrustedJSONError",
        "parse_json",
        "printable",
        "printable_data",
    ),
    "flower.core.workbench": ("Workbench",),
    "flower.core.workspace": (
        "in_git_repository",
        "shown",
        "workbench_location",
        "workspace_refusal",
    ),
    "flower.errors": ("FlowerError",),
    "flower.stores": (
        "EphemeralPolicy",
        "PrunePolicy",
        "PruningSessionStore",
        "SqliteSessionStore",
        "TrimPolicy",
        "TrimmingSessionStore",
        "is_ephemeral",
    ),
    "flower.workflow.base": ("Step", "StepAbort", "Workflow"),
    "flower.workflow.starter": (
        "clarify_step",
        "goal_step",
        "starter_flow",
        "wake_state",
        "with_goal",
    ),
}
__all__ = [
    "ANSWER_COMMAND_ENV",
    "AgentSpec",
    "Ask",
    "Brief",
    "CLARIFY_RULES",
    "COORDINATOR_RULES",
    "CREDENTIALS",
    "CompactPolicy",
    "DECLINED",
    "DEFAULT_PRICES",
    "EphemeralPolicy",
    "Event",
    "EventKind",
    "FlowerError",
    "Goal",
    "Handoff",
    "HandoffPolicy",
    "HumanChannel",
    "JUDGE_RULES",
    "LANG_ENV",
    "Lineage",
    "Lookup",
    "MeteredCall",
    "ORACLE_RULES",
    "OVER_BUDGET",
    "PLUGIN_DIR",
    "Price",
    "PriceTable",
    "PrintableStream",
    "PrunePolicy",
    "PruningSessionStore",
    "RUN_ID_ENV",
    "Resilience",
    "RunDir",
    "Runtime",
    "SqliteSessionStore",
    "StateFileError",
    "Step",
    "StepAbort",
    "StepResult",
    "TIMEOUT",
    "Timeline",
    "TrimPolicy",
    "TrimmingSessionStore",
    "UntrustedJSONError",
    "Verdict",
    "WORKER_RULES",
    "Workbench",
    "Workflow",
    "__version__",
    "atomic_write_json",
    "build_options",
    "build_trace",
    "check_credentials",
    "check_traces",
    "clarify",
    "clarify_step",
    "classify",
    "cli_version",
    "coordinator",
    "default_window",
    "delegate_guard",
    "describe",
    "export_trace",
    "git_exclude",
    "git_unexcluded",
    "goal_step",
    "in_git_repository",
    "index_guard",
    "is_ephemeral",
    "iso_utc",
    "isolate_guard",
    "isolated",
    "judge",
    "load_dotenv",
    "merge_hooks",
    "new_run_id",
    "normalize",
    "oracle",
    "parse_dotenv",
    "parse_json",
    "printable",
    "printable_data",
    "read_event_lines",
    "read_json",
    "read_run_rows",
    "read_timeline",
    "shown",
    "spill_guard",
    "starter_flow",
    "text",
    "token_count",
    "trace_content_wanted",
    "traces_wanted",
    "update_json",
    "wake_state",
    "wants_isolation",
    "whitelist_guard",
    "with_goal",
    "word",
    "workbench_hooks",
    "workbench_location",
    "worker",
    "workspace_refusal",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)


if TYPE_CHECKING:  # what type checkers and IDEs see
    from flower.core.agent import (
        PLUGIN_DIR,
        AgentSpec,
        CompactPolicy,
        HandoffPolicy,
        build_options,
    )
    from flower.core.brief import Brief
    from flower.core.bundled import cli_version
    from flower.core.env import (
        CREDENTIALS,
        Lookup,
        check_credentials,
        describe,
        load_dotenv,
        parse_dotenv,
    )
    from flower.core.event import Event, EventKind
    from flower.core.events import normalize
    from flower.core.exclude import git_exclude, git_unexcluded
    from flower.core.goal import Goal, Verdict
    from flower.core.guard import (
        delegate_guard,
        index_guard,
        isolate_guard,
        isolated,
        merge_hooks,
        spill_guard,
        wants_isolation,
        whitelist_guard,
        workbench_hooks,
    )
    from flower.core.handoff import Handoff
    from flower.core.human import DECLINED, OVER_BUDGET, TIMEOUT, Ask, HumanChannel
    from flower.core.inbox import ANSWER_COMMAND_ENV
    from flower.core.lang import LANG_ENV, text, word
    from flower.core.lineage import Lineage
    from flower.core.otlp import (
        check_traces,
        export_trace,
        trace_content_wanted,
        traces_wanted,
    )
    from flower.core.pricing import DEFAULT_PRICES, Price, PriceTable, token_count
    from flower.core.resilience import Resilience, classify
    from flower.core.roles import (
        CLARIFY_RULES,
        COORDINATOR_RULES,
        JUDGE_RULES,
        ORACLE_RULES,
        WORKER_RULES,
        clarify,
        coordinator,
        judge,
        oracle,
        worker,
    )
    from flower.core.rundir import RUN_ID_ENV, RunDir, new_run_id
    from flower.core.runtime import Runtime, StepResult
    from flower.core.statefile import StateFileError, atomic_write_json, read_json, update_json
    from flower.core.timeline import Timeline, read_timeline
    from flower.core.times import iso_utc
    from flower.core.trace import MeteredCall, build_trace, read_event_lines, read_run_rows
    from flower.core.untrusted import (
        PrintableStream,
        UntrustedJSONError,
        parse_json,
        printable,
        printable_data,
    )
    from flower.core.window import default_window
    from flower.core.workbench import Workbench
    from flower.core.workspace import (
        in_git_repository,
        shown,
        workbench_location,
        workspace_refusal,
    )
    from flower.errors import FlowerError
    from flower.stores import (
        EphemeralPolicy,
        PrunePolicy,
        PruningSessionStore,
        SqliteSessionStore,
        TrimmingSessionStore,
        TrimPolicy,
        is_ephemeral,
    )
    from flower.workflow.base import Step, StepAbort, Workflow
    from flower.workflow.starter import (
        clarify_step,
        goal_step,
        starter_flow,
        wake_state,
        with_goal,
    )
