"""The top-level API: the seeds' 62 names plus what flowerbox needs, each importable, and
`import flower` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import flower

# Added by issue 18: the error base, and what flowerbox needs (it imports nothing else).
ADDED = {
    "CREDENTIALS",
    "FlowerError",
    "Lookup",
    "RunDir",
    "StateFileError",
    "atomic_write_json",
    "in_git_repository",
    "parse_dotenv",
    "read_json",
    "update_json",
    "workbench_location",
}
# Added by issue 19: the price table the gateway and Runtime's running accounts share.
ADDED |= {"DEFAULT_PRICES", "Price", "PriceTable", "token_count"}
# Added by issue 20: one run id for both CLIs, and the time format of every --json document.
ADDED |= {"RUN_ID_ENV", "iso_utc", "new_run_id"}
# Added by issue 20: the run's timeline, which flowerbox's `report RUN` draws from the host.
ADDED |= {"Timeline", "read_timeline"}
# Added by issue 20: flowerbox keeps runs/ out of the user's `git status` on the host.
ADDED |= {"git_exclude", "git_unexcluded"}
# Added by issue 21: the folders no run may work in, said the same by flower and flowerbox.
ADDED |= {"shown", "workspace_refusal"}
# ... and the variable flowerbox tells the box's flower how its questions are answered by.
ADDED |= {"ANSWER_COMMAND_ENV"}
# ... and the variable that carries the language into the box (issue 21, item 6).
ADDED |= {"LANG_ENV"}
# Added by issue 37: the one sanitizer and bounded parser of what a box writes, for flower's
# commands and flowerbox's alike.
ADDED |= {"PrintableStream", "UntrustedJSONError", "parse_json", "printable", "printable_data"}
# Added by issue 31: the bundled CLI's version, read without importing the SDK (host commands).
ADDED |= {"cli_version"}
# Added by issue 33: a run's trace, which flowerbox builds on the host from the gateway's
# ledger and the box's files, and exports by the same standard variables.
ADDED |= {"MeteredCall", "build_trace", "read_event_lines", "read_run_rows"}
ADDED |= {"check_traces", "export_trace", "trace_content_wanted", "traces_wanted"}
# Added by issue 36: the text tables, for flowerbox's refusals and end lines in the run's language.
ADDED |= {"text", "word"}


def test_the_public_names_all_resolve() -> None:
    assert len(flower.__all__) == 62 + len(ADDED)
    assert set(flower.__all__) >= ADDED
    assert flower.__all__ == sorted(flower.__all__)
    for name in flower.__all__:
        assert getattr(flower, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        flower.Nope  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "Nope" in str(exc)
    else:
        raise AssertionError("flower.Nope resolved")


@pytest.mark.parametrize(
    "imports",
    [
        "import flower",
        # 004:3: the interaction layer knows Event only; flower's names load lazily, so the
        # module that defines Event (and a renderer built on it) must be loaded to be checked
        "from flower import Event, EventKind; Event('text', 'hi').kind",
        "import flower.cli.render",
    ],
)
def test_import_flower_does_not_import_the_sdk(imports: str) -> None:
    probe = f"import sys\n{imports}\nprint('claude_agent_sdk' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_all_the_lazy_map_and_the_typed_imports_agree() -> None:
    """Three lists of the same names (one for readers, one for loading, one for type
    checkers) cannot drift apart."""
    from flower import _HOMES

    homes = {(module, name) for module, names in _HOMES.items() for name in names}
    tree = ast.parse(Path(str(flower.__file__)).read_text(encoding="utf-8"))
    [block] = [
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
    ]
    typed = {
        (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert set(flower.__all__) == {name for _, name in homes} | {"__version__"}
    assert typed == homes


def test_the_cli_and_testing_packages_export_what_flowerbox_reuses() -> None:
    import flower.cli
    import flower.testing
    from flower.cli.render import Render
    from flower.cli.setup import setup

    assert (flower.cli.Render, flower.cli.setup) == (Render, setup)
    assert flower.testing.DEMO_ASK and callable(flower.testing.starter_cast)


@pytest.mark.parametrize("module", ["flower.cli", "flower.cli.app"])
def test_the_cli_does_not_import_the_sdk_before_a_command_runs(module: str) -> None:
    """`flower --help` stays fast: the SDK loads only inside the commands that need it."""
    probe = f"import sys, {module}; print('claude_agent_sdk' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
