"""The `--json` contract: one versioned shape for every machine-readable output of both CLIs.

Every document is one JSON object with `schema_version`, `command` and `error` (null, or
{kind, message, fix} when the command refused or failed before its result: exit 2 writes one
too, so a CI job's `summary.json` is never empty). Times are ISO-8601 in UTC, numbers are
rounded to 1e-6 (no float noise), attempts have one shape wherever they appear (`attempt`):
the step's stable id (`step`), the label it is recorded under (`name`), its role and round.
The JSON Schema ships beside this module (`output.schema.json`, docs/json.md shows it); a
change that breaks a reader bumps SCHEMA_VERSION.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from typer import _click  # typer >= 0.26 vendors click: its usage errors are these

from flower.core import lang
from flower.core.labels import parse_label
from flower.core.manifest import row_state
from flower.core.rundir import RunDir
from flower.core.statefile import StateFileError, read_json
from flower.core.times import iso_utc

SCHEMA_VERSION = 1
SCHEMA_FILE = "output.schema.json"
DIGITS = 6  # costs and durations: a millionth of a dollar or of a second is enough


def schema() -> dict[str, Any]:
    """The JSON Schema every document validates against."""
    # lazy: importlib.resources costs every start of both CLIs; only the schema's readers use it
    from importlib import resources

    text = resources.files(__package__ or "flower.cli").joinpath(SCHEMA_FILE).read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def document(command: str, **payload: Any) -> dict[str, Any]:
    """A document of `command` ("flower status", "flowerbox ps"...) with no error."""
    return {"schema_version": SCHEMA_VERSION, "command": command, "error": None, **payload}


def refusal(command: str, exc: BaseException, exit_code: int) -> dict[str, Any]:
    """The document of a command that refused (`exc`) and exits `exit_code`."""
    return failure(command, error_kind(exc), str(exc), error_fix(exc), exit_code)


def failure(command: str, kind: str, message: str, fix: str, exit_code: int) -> dict[str, Any]:
    """A document saying `command` failed before its result: what (`kind`), why, what to
    do, and the exit status that follows."""
    error = {"kind": kind, "message": message, "fix": sentence(fix)}
    return {**document(command), "error": error, "exit_code": exit_code}


def error_kind(exc: BaseException) -> str:
    """A refusal's kind for machines: its class name in snake case (`RunBusyError` ->
    `run_busy`)."""
    name = type(exc).__name__.removesuffix("Error") or type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def error_fix(exc: BaseException) -> str:
    """What to do (`failure` makes it a sentence): the error's own `fix` when it has one, else the
    message's advice (what follows its last colon, `: ` or the zh `：`, outside brackets, quotes
    and backticks: a colon inside `(e.g.: --timeout)` made the fix "--timeout)"), else the
    command's help."""
    fix = getattr(exc, "fix", None)
    if isinstance(fix, str) and fix.strip():
        return fix
    message = str(exc)
    colons = [(i, 2) for i in range(len(message)) if message.startswith(": ", i)]
    colons += [(i, 1) for i, char in enumerate(message) if char == "："]
    for at, width in sorted(colons, reverse=True):
        head, advice = message[:at], message[at + width :].strip()
        if head and advice and _balanced(head) and _balanced(advice):
            return advice
    return lang.text("error.usage_fix")


def sentence(text: str) -> str:
    """`text` as a sentence: a capital first letter (a command in backticks stays as it is)
    and a full stop (a Chinese one after Chinese)."""
    text = text.strip()
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    if text.endswith((".", "!", "?", "。", "？", "！")):
        return text
    return f"{text}。" if any("\u4e00" <= char <= "\u9fff" for char in text) else f"{text}."


def _balanced(text: str) -> bool:
    """No bracket left open or closed, and whole pairs of backticks and double quotes."""
    depth = 0
    for char in text:
        depth += {"(": 1, "[": 1, "（": 1, ")": -1, "]": -1, "）": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0 and text.count("`") % 2 == 0 and text.count('"') % 2 == 0


def emit(data: Mapping[str, Any], *, indent: int | None = 2) -> None:
    """Write one document on stdout, numbers rounded, and flush (a pipe sees it now)."""
    sys.stdout.write(json.dumps(_rounded(data), ensure_ascii=False, indent=indent) + "\n")
    sys.stdout.flush()


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, DIGITS)
    if isinstance(value, Mapping):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def attempt(row: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    """One manifest row (one step's attempts under one label) in the contract's shape.

    The row is read from a file a box may have written: every field is checked for its
    type, and a wrong one reads as absent.
    """
    label = parse_label(str(row.get("step", "?")))
    started, ended = _number(row.get("started_at")), _number(row.get("ended_at"))
    errors = row.get("errors")
    usage = row.get("usage")
    attempts = row.get("attempts")
    turns = row.get("num_turns")
    retired = row.get("retired")
    return {
        "step": label.step,
        "name": label.label,
        "role": label.role,
        "round": label.round,
        "retry": label.retry,
        "run_id": _text(row.get("run")),
        "state": row_state(row, run_dir),
        "ok": row.get("ok") is True,
        "session_id": _text(row.get("session_id")),
        "attempts": attempts if isinstance(attempts, int) and attempts >= 0 else 1,
        "num_turns": turns if isinstance(turns, int) and turns >= 0 else 0,
        "cost_usd": _number(row.get("cost_usd")),
        "usage": {str(k): v for k, v in usage.items() if isinstance(v, int)}
        if isinstance(usage, dict)
        else {},
        "error": _text(row.get("error")),
        "errors": [str(e) for e in errors] if isinstance(errors, list) else [],
        "resumed": row.get("resumed") is True,
        "retired": [str(r) for r in retired] if isinstance(retired, list) else [],
        "started_at": iso_utc(started),
        "ended_at": iso_utc(ended),
        "duration_s": round(ended - started, 3) if started and ended >= started else None,
    }


def run_attempts(run_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """The attempt records of run `run_id`, read back from its run directory's manifest
    ([] when it holds none, or cannot be read: the run's own figures stand without them)."""
    try:
        rows = read_json(RunDir(run_dir).manifest, [])
    except StateFileError:
        return []
    if not isinstance(rows, list):
        return []
    return [attempt(r, run_dir) for r in rows if isinstance(r, dict) and r.get("run") == run_id]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class JsonRefusals:
    """A mixin for a CLI's root group: with `--json` on the command line, a refusal that
    comes before the command's own code (an unknown option, a bad value: click's usage
    errors) is also one error document on stdout, so every exit writes one. Refusals inside
    a command are the command's to write (flower.cli.exits.exit_codes); `json_mode` tells
    a group that maps them itself (flowerbox) whether to."""

    json_mode = False

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        self.json_mode = "--json" in argv
        if not self.json_mode or extra.get("standalone_mode") is False:
            return super().main(argv, *rest, **extra)  # type: ignore[misc]
        extra["standalone_mode"] = False
        try:
            code = super().main(argv, *rest, **extra)  # type: ignore[misc]
        except _click.ClickException as exc:
            exc.show()
            command = self.command_name(argv)
            fix = lang.text("error.see_help", command=command)
            emit(failure(command, "usage", exc.format_message(), fix, exc.exit_code))
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def command_name(self, argv: Sequence[str]) -> str:
        """`<program> <command>` of a command line, as documents name it."""
        name = getattr(self, "name", None) or "flower"
        commands: Mapping[str, Any] = getattr(self, "commands", {})
        word = next((a for a in argv if not a.startswith("-")), None)
        return f"{name} {word if word in commands else 'go'}"
