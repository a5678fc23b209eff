"""Read a `--json` output as a script would, and hold it to the published schema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from flower.cli.contract import schema

VALIDATOR = jsonschema.Draft202012Validator(schema())


def parse_document(text: str) -> dict[str, Any]:
    """The one JSON document `text` holds, checked against the schema (AssertionError with
    every violation otherwise)."""
    document = json.loads(text)
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(document)]
    assert not problems, "\n".join(problems)
    assert isinstance(document, dict)
    return document


def parse_lines(text: str) -> list[dict[str, Any]]:
    """One document per line (`status -f --json`), each checked."""
    return [parse_document(line) for line in text.splitlines() if line.strip()]
