"""The host commands import what they use (issue 31), read from `python -X importtime` of the
real console scripts, which lists every module a process really imported: the lazy names of
`flower` and `flower.cli`, the imports inside functions and the commands a group loads on
first use (flower.cli.LazyCommands), which import-linter cannot see, are counted too.

flowerbox's host never imports the SDK (the box runs it; its import, most of it `mcp`'s
types, cost every `flowerbox ps` most of a second), and a command does not import the other
commands' modules. Module sets, not times: bench.cli measures what they are worth.

A module imported by `importlib.import_module` (a lazy name, a command's module) is not on
its own line (only the C import path is timed), but every module it imports is: a command
is seen by a module its own module imports.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = frozenset({"claude_agent_sdk", "mcp"})
SCRIPTS = Path(sys.executable).parent


def imported(command: list[str], cwd: Path) -> set[str]:
    """The modules `python -X importtime COMMAND` imported in `cwd` (with an empty runs/, as
    `flower status` wants); it must exit 0."""
    (cwd / "runs").mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", "XDG_STATE_HOME": str(cwd / "state")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert lines, "python -X importtime printed nothing"
    return {line.rsplit("|", 1)[1].strip() for line in lines}


def script(line: str) -> list[str]:
    """The console script `line` names, as a person runs it, with its arguments."""
    name, *args = line.split()
    return [str(SCRIPTS / name), *args]


def tops(modules: set[str]) -> set[str]:
    return {module.split(".")[0] for module in modules}


@pytest.mark.parametrize(
    "line",
    [
        "flowerbox --version",
        "flowerbox --help",
        "flowerbox ps",
        "flowerbox version",
        "flower --help",
        "flower status",
    ],
)
def test_a_host_command_imports_neither_the_sdk_nor_mcp(line: str, tmp_path: Path) -> None:
    modules = tops(imported(script(line), tmp_path))
    assert line.split()[0] in modules  # the reading works: it saw the command's own package
    assert not modules & HEAVY, sorted(modules & HEAVY)


def test_python_m_flowerbox_imports_neither(tmp_path: Path) -> None:
    assert not tops(imported(["-m", "flowerbox", "ps"], tmp_path)) & HEAVY


def test_the_report_is_drawn_on_the_host_without_the_sdk(tmp_path: Path) -> None:
    """`flowerbox report` and `flower report` read the run's timeline with the model's context
    window (flower.default_window, flower.core.window), which once lived beside the SDK's
    options and loaded it. The modules the report's own functions import when they draw
    (flower.cli.report loads them late) are imported as they are."""
    code = (
        "import flowerbox.runs.control, flower.cli.report;"
        " import flower.core.timeline, flower.core.window, flower.cli.picture, flower.cli.browser;"
        " from flower import default_window, read_timeline; default_window()"
    )
    modules = imported(["-c", code], tmp_path)
    assert "flower.core.window" in modules
    assert not tops(modules) & HEAVY, sorted(tops(modules) & HEAVY)


def test_the_reading_sees_the_sdk_where_it_is_imported(tmp_path: Path) -> None:
    """The negative control: flower's runtime does import it, and the reading says so."""
    assert tops(imported(["-c", "import flower.core.runtime"], tmp_path)) >= HEAVY


def test_flowerbox_version_is_answered_before_the_command_line_loads(tmp_path: Path) -> None:
    """The console script answers `--version` alone itself (flowerbox.cli.main): no typer,
    no rich; the same line the typer app prints for it among other options."""
    modules = imported(script("flowerbox --version"), tmp_path)
    assert "flowerbox" in modules
    assert not tops(modules) & {"typer", "rich"}, sorted(tops(modules) & {"typer", "rich"})
    eager = subprocess.run(script("flowerbox --version"), capture_output=True, text=True)
    typed = subprocess.run(script("flowerbox --lang en --version"), capture_output=True, text=True)
    assert (eager.returncode, typed.returncode) == (0, 0)
    assert eager.stdout == typed.stdout
    assert eager.stdout.startswith("flowerbox ")


@pytest.mark.parametrize(
    ("line", "own", "others"),
    [
        (
            "flowerbox ps",
            "flowerbox.runs.control",
            {
                "flowerbox.cli.box",
                "flowerbox.cli.checks",
                "flowerbox.selftest",
                "docker",
                "flower.core.timeline",
                "asyncio",
            },
        ),
        ("flower status", "flower.core.workbench", {"flower.cli.go", "flower.cli.report"}),
        ("flower --version", "flower.cli.routing", {"flower.cli.status", "flower.cli.go"}),
    ],
)
def test_a_command_imports_its_own_module_not_the_others(
    line: str, own: str, others: set[str], tmp_path: Path
) -> None:
    """`own`: a module the command's own module imports; `others`: the other commands'."""
    modules = imported(script(line), tmp_path)
    assert own in modules
    assert not modules & others, sorted(modules & others)


DRAWING = {"flower.cli.picture", "flower.cli.browser", "flower.core.timeline"}
"""What `report` draws with: loaded when it draws, not to list the command."""
LIGHT = {
    "flowerbox --help": {
        "pydantic",
        "markdown_it",
        "pygments",
        "attr",
        "msgspec",
        "asyncio",
        *DRAWING,
    },
    "flowerbox ps --help": {"pydantic", "markdown_it", "pygments", "attr", "msgspec"},
    "flowerbox ps": {"pydantic", "markdown_it", "pygments", "attr", "msgspec", "typer.rich_utils"},
    "flower --help": {"pydantic", "markdown_it", "pygments", "attr", "asyncio", *DRAWING},
    "flower status": {"pydantic", "markdown_it", "pygments", "attr", "typer.rich_utils"},
}
"""What each command does not load (issue 31, bench.cli): typer's pydantic adapters for
parameters left at their defaults (flower.cli.coercion), rich's Markdown and Traceback for
a help page (flower.cli.richhelp), msgspec, which decodes a run's recorded spec, and
asyncio, which only a run's loop needs; a help page not `report`'s drawing (DRAWING)."""
NOT_FOR_LISTING = {"flowerbox.box.spec", "flowerbox.hostgit", "hashlib", "tomllib"}
"""What a run's start needs and listing runs, or the help, does not."""


@pytest.mark.parametrize("line", sorted(LIGHT))
def test_a_help_page_or_a_listing_loads_nothing_heavy(line: str, tmp_path: Path) -> None:
    modules = imported(script(line), tmp_path)
    assert "rich.console" in modules  # the reading works
    heavy = {m for m in modules if m in LIGHT[line] or m.split(".")[0] in LIGHT[line]}
    if line.startswith("flowerbox"):
        heavy |= modules & NOT_FOR_LISTING
    assert not heavy, sorted(heavy)


def all_modules(module: str, cwd: Path) -> set[str]:
    """The modules a fresh isolated Python holds once it imported `module`."""
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def flowerbox_modules(module: str, cwd: Path) -> set[str]:
    """The flowerbox modules a fresh Python holds once it imported `module`."""
    return {m for m in all_modules(module, cwd) if m.startswith("flowerbox")}


def test_a_waiting_keeper_holds_no_module_only_the_end_of_its_run_needs(tmp_path: Path) -> None:
    """A detached run's keeper lives as long as its run, one per run (issue 31: a hundred runs
    on one machine, bench.many): the boundary's checks, the broker's servers and the private
    folders' cleanup are imported when the run has ended, not while it waits; it waits on the
    engine's API with the standard library, not the docker SDK (11 of its 35 MiB)."""
    loaded = all_modules("flowerbox.runs.supervise", tmp_path)
    assert "flowerbox.box.running" in loaded  # what it waits with is there: the reading works
    late = {"flowerbox.runs.boundary", "flowerbox.broker.server", "flowerbox.box.prepare"}
    assert not loaded & late, sorted(loaded & late)
    sdk = {"docker", "requests", "urllib3", "flowerbox.box.engine"}
    assert not loaded & sdk, sorted(loaded & sdk)


def test_a_waiting_guard_holds_only_the_interpreter(tmp_path: Path) -> None:
    """A detached run's guard (flowerbox.runs.guard) waits as long as its run, one per run:
    the run's records, the engine's API and the cleanup load once its keeper is gone."""
    loaded = all_modules("flowerbox.runs.guard", tmp_path)
    late = {
        "flowerbox.runs.records",
        "flowerbox.box.running",
        "flowerbox.box.prepare",
        "flowerbox.box.spec",
        "docker",
        "msgspec",
    }
    assert "flowerbox.runs.guard" in loaded
    assert not loaded & late, sorted(loaded & late)


def test_a_box_start_asks_for_a_broker_without_loading_one(tmp_path: Path) -> None:
    """Every `flowerbox "ask"` asks whether a broker runs (issue 31 item 2: the box's start):
    the control protocol is all it loads of the broker, not the broker's or the gateway's
    servers (about 45 ms of CPU on this machine)."""
    loaded = flowerbox_modules("flowerbox.runs.launch", tmp_path)
    assert "flowerbox.broker.client" in loaded  # the question is asked with what is loaded
    servers = {"flowerbox.broker.server", "flowerbox.sidecar.gateway", "flowerbox.runs.brokerserve"}
    assert not loaded & servers, sorted(loaded & servers)
