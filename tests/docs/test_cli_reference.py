"""The committed CLI reference is exactly what the generator makes from the typer apps now."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest
import typer.main

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_committed_reference_matches_the_cli(generator: ModuleType) -> None:
    for page in generator.PAGES:
        committed = (DOCS / "cli" / page.file).read_text(encoding="utf-8")
        assert committed == generator.render(page), (
            f"docs/cli/{page.file} differs from `{page.program} --help`: "
            f"regenerate it with `{generator.REGENERATE}` and commit it"
        )


def test_every_visible_command_and_option_is_in_the_reference(generator: ModuleType) -> None:
    for page in generator.PAGES:
        text = generator.render(page)
        group = typer.main.get_command(importlib.import_module(page.module).app)
        root = typer.Context(group, info_name=page.program)
        for name in group.list_commands(root):
            command = group.get_command(root, name)
            if command is None or command.hidden:
                continue
            assert f"## `{page.program} {name}`" in text
            ctx = typer.Context(command, info_name=name, parent=root)
            for param in command.get_params(ctx):
                if param.param_type_name == "option" and not param.hidden:
                    assert all(opt in text for opt in param.opts), (name, param.opts)


def test_the_reference_does_not_depend_on_the_environment(
    generator: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = [generator.render(page) for page in generator.PAGES]
    monkeypatch.setenv("FLOWERBOX_IMAGE", "somebody-elses:tag")
    monkeypatch.setenv("FLOWERBOX_BASE_IMAGE", "debian:trixie")
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.setenv("TERMINAL_WIDTH", "37")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.chdir(DOCS)
    assert [generator.render(page) for page in generator.PAGES] == before


def test_check_mode_reports_a_stale_page_and_the_command(
    generator: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(generator, "HERE", tmp_path)
    (tmp_path / "flower.md").write_text("# out of date\n", encoding="utf-8")
    assert generator.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "flower.md" in out and generator.REGENERATE in out
    assert generator.main([]) == 0  # writes both pages
    assert generator.main(["--check"]) == 0
    assert (tmp_path / "flowerbox.md").read_text(encoding="utf-8").startswith("# `flowerbox`")
