"""Every `flower` / `flowerbox` command line the docs and examples show is one the CLI accepts:
the command exists and so does every option it passes (the reference is generated, but prose
and examples are written by hand)."""

from __future__ import annotations

import importlib
import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
import yaml

from flower.cli.routing import hoisted

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = {"flower": "flower.cli.app", "flowerbox": "flowerbox.cli.app"}
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"(?<!`)`((?:flower|flowerbox) [^`\n]+)`(?!`)")
OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}
CI_EXAMPLE = ROOT / "examples" / "ci" / "github-actions.yml"


@cache
def commands(program: str) -> dict[str, set[str]]:
    """Command name -> every option spelling it accepts ("" is the group itself)."""
    group = typer.main.get_command(importlib.import_module(PROGRAMS[program]).app)
    root = typer.Context(group, info_name=program)
    found = {"": _options(group, root)}
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        assert command is not None
        ctx = typer.Context(command, info_name=name, parent=root)
        found[name] = _options(command, ctx)
        for sub in getattr(command, "commands", {}):  # a group of its own: `flowerbox kube`
            inner = command.commands[sub]
            found[f"{name} {sub}"] = _options(
                inner, typer.Context(inner, info_name=sub, parent=ctx)
            )
    return found


def _options(command: Any, ctx: typer.Context) -> set[str]:
    return {
        opt
        for param in command.get_params(ctx)
        if param.param_type_name == "option"
        for opt in (*param.opts, *param.secondary_opts)
    }


def problems(line: str) -> list[str]:
    """What is wrong with one shell line that runs flower or flowerbox (empty: nothing)."""
    words = shlex.split(line, comments=True)
    for cut, word in enumerate(words):
        if word in OPERATORS or word.startswith((">", "2>")):
            words = words[:cut]
            break
    # The root's --lang may stand anywhere on the line: the router moves it in front.
    program, (_, args) = words[0], hoisted(words[1:])
    known = commands(program)
    if args and args[0].startswith("-"):
        name, rest = "", args  # options of the group itself (--version)
    elif args[:2] and " ".join(args[:2]) in known:
        name, rest = " ".join(args[:2]), args[2:]
    elif args and args[0] in known:
        name, rest = args[0], args[1:]
    else:
        name, rest = "go", args  # the first word names no command: it is the ask
    if name not in known:
        return [f"{program} has no command {name!r}"]
    accepted = set(known[name])
    if program == "flowerbox" and name in ("go", "once", "run"):
        accepted |= commands("flower")[name]  # passed through to flower inside the box
    wrong = []
    for word in rest:
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1 and not word[1:].replace(".", "").isdigit():
            option = word.split("=", 1)[0]
            if option not in accepted:
                wrong.append(f"{program} {name} has no option {option}")
    return wrong


def shown_lines() -> list[tuple[str, str]]:
    """(where, line) for each flower/flowerbox command in a shell block or an inline code
    span of the hand-written pages (docs/cli/ is generated from the CLI itself)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for block in SHELL_BLOCK.findall(text):
            for line in block.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.split(" ", 1)[0] in PROGRAMS:
                    found.append((page.name, line))
        prose = SHELL_BLOCK.sub("", text)
        found += [(page.name, span) for span in INLINE.findall(prose)]
    return found


def ci_lines() -> list[str]:
    workflow = yaml.safe_load(CI_EXAMPLE.read_text(encoding="utf-8"))
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    scripts = [step.get("run", "") for step in steps]
    return [
        line.strip()
        for script in scripts
        for line in script.splitlines()
        if line.strip().split(" ", 1)[0] in PROGRAMS
    ]


def test_the_docs_show_commands() -> None:
    assert len(shown_lines()) >= 15


@pytest.mark.parametrize(("page", "line"), shown_lines())
def test_each_command_line_in_the_docs_is_accepted(page: str, line: str) -> None:
    assert not problems(line), f"docs: {page}: `{line}`: {problems(line)}"


def test_the_checker_catches_a_wrong_line() -> None:
    assert problems('flowerbox "ask" --timeout 0 --json --budget 5') == []
    assert problems("flower once 'x' --timeout 0") == ["flower once has no option --timeout"]
    assert problems("flowerbox kube render x --repo https://a.example/r.git") == []
    assert problems("flowerbox kube apply-broker --repo x") == [
        "flowerbox kube apply-broker has no option --repo"
    ]
    assert problems("flowerbox nosuch") == []  # the ask "nosuch"
    assert problems("flower status --jsn") == ["flower status has no option --jsn"]


def test_the_ci_example_runs_flowerbox_unattended_with_the_key_from_a_secret() -> None:
    text = CI_EXAMPLE.read_text(encoding="utf-8")
    workflow = yaml.safe_load(text)
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "workflow_dispatch" in triggers
    lines = ci_lines()
    assert lines and all(not problems(line) for line in lines), lines
    assert any(
        line.startswith("flowerbox ") and "--timeout 0" in line and "--json" in line
        for line in lines
    )
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    holders = [step for step in steps if "secrets.ANTHROPIC_API_KEY" in str(step)]
    assert len(holders) == 1, "the key reaches exactly one step"
    (holder,) = holders
    assert holder["env"]["ANTHROPIC_API_KEY"] == "${{ secrets.ANTHROPIC_API_KEY }}"
    assert "secrets." not in holder["run"], "never in a command line"
    assert any(line.startswith("flowerbox ") for line in holder["run"].splitlines())


def test_the_ci_example_delivers_a_patch_and_keeps_transcripts_only_when_asked() -> None:
    """Issue 20, item 3: the artifact is the work (a patch made on the host from the run's
    branch), not the transcripts and the box's home; the box runs where no token can write,
    and no token sits in the checkout's .git/config for the box to read."""
    workflow = yaml.safe_load(CI_EXAMPLE.read_text(encoding="utf-8"))
    box_job = workflow["jobs"]["ask"]
    assert "permissions" not in box_job and workflow["permissions"] == {"contents": "read"}
    checkout = box_job["steps"][0]
    assert checkout["with"]["persist-credentials"] is False
    uploads = [s for s in box_job["steps"] if str(s.get("uses", "")).startswith("actions/upload")]
    default = [s for s in uploads if "inputs." not in str(s.get("if", ""))]
    assert len(default) == 1 and default[0]["with"]["path"].split() == [
        "summary.json",
        "flower.patch",
    ]
    [kept] = [s for s in uploads if s not in default]
    assert kept["if"] == "always() && inputs.transcripts"
    assert "!project/runs/home/" in kept["with"]["path"].split()
    patch = next(s for s in box_job["steps"] if "flower.patch" in s.get("run", ""))
    assert "refs/heads/flower/" in patch["run"]
    pull = workflow["jobs"]["pull-request"]
    assert pull["needs"] == "ask" and pull["permissions"]["contents"] == "write"
    assert "flower.patch" in str(pull["steps"])
