"""Every message docs/troubleshooting.md quotes (its `text` blocks) is still in the code."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
BLOCK = re.compile(r"^```text\n(.*?)^```", re.MULTILINE | re.DOTALL)
ENDS = " \t.,:;()'\""
SHORTEST = 8  # shorter pieces ("…: …", "(…)") would match anything


@cache
def literals() -> tuple[str, ...]:
    """Every string literal in flower/ and flowerbox/, f-string fields shown as `…`.
    Implicitly concatenated literals are one literal here, as the parser joins them."""
    found: list[str] = []
    for path in sorted((*ROOT.glob("flower/**/*.py"), *ROOT.glob("flowerbox/**/*.py"))):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
            elif isinstance(node, ast.JoinedStr):
                found.append(
                    "".join(
                        part.value if isinstance(part, ast.Constant) else "…"
                        for part in node.values
                    )
                )
    return tuple(found)


def pieces(message: str) -> list[str]:
    """The fixed parts of a quoted message: split at `…`, line ends and sentence ends (some
    messages are a problem and a fix joined at run time), trimmed."""
    parts = (
        part.strip(ENDS)
        for line in message.splitlines()
        for field in line.split("…")
        for part in field.split(". ")
    )
    return [part for part in parts if len(part) >= SHORTEST]


def quoted() -> list[str]:
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def test_the_page_quotes_messages() -> None:
    assert len(quoted()) >= 25


def test_every_quoted_message_is_still_in_the_code() -> None:
    missing = [
        piece
        for message in quoted()
        for piece in pieces(message)
        if not any(piece in literal for literal in literals())
    ]
    assert not missing, (
        "docs/troubleshooting.md quotes messages the code no longer prints; "
        f"update those entries: {missing}"
    )


def test_a_changed_message_is_caught() -> None:
    assert pieces("the image … is gone: run `flowerbox build`") == [
        "the image",
        "is gone: run `flowerbox build`",
    ]
    assert any("is gone: run `flowerbox build`" in literal for literal in literals())
    assert not any("is gone: run `flowerbox rebuild`" in literal for literal in literals())
