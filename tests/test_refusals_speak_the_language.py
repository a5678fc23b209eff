"""Every refusal a person reads is in the run's language (issue 36 item 5): an error flower
or flowerbox raises on purpose (a FlowerError or FlowerboxError, whose message the CLIs print
with exit 2, and the broker and the gateway answer or log) takes its words from the message
tables (`text(key, ...)`), never from an English literal at the raise site.

Read from the source, so a new raise site with an English sentence fails here before a zh
user meets it. A ValueError or TypeError that is not one of these is a bug, shown with its
traceback, and stays English (flower.errors).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASES = frozenset({"FlowerError", "FlowerboxError"})
TABLES = ROOT / "flower" / "core" / "texts"


def sources() -> Iterator[tuple[Path, ast.Module]]:
    for package in ("flower", "flowerbox"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if not path.is_relative_to(TABLES):
                yield path, ast.parse(path.read_text(), filename=str(path))


def refusal_classes(trees: list[ast.Module]) -> frozenset[str]:
    """The names of the classes that derive, by name, from flower's or flowerbox's base."""
    known = set(BASES)
    classes = [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    while True:
        grown = {
            c.name
            for c in classes
            if any(isinstance(b, ast.Name | ast.Attribute) and name_of(b) in known for b in c.bases)
        }
        if grown <= known:
            return frozenset(known)
        known |= grown


def name_of(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def is_sentence(node: ast.expr) -> bool:
    """A literal a person would read: an f-string, or a string with a space in it."""
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value


def english_raises() -> list[str]:
    """`path:line: Class` of each raise of a refusal class with a literal sentence."""
    parsed = list(sources())
    refusals = refusal_classes([tree for _, tree in parsed])
    found = []
    for path, tree in parsed:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            call = node.exc
            said = [*call.args, *(k.value for k in call.keywords)]
            if name_of(call.func) in refusals and any(is_sentence(arg) for arg in said):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name_of(call.func)}")
    return found


def test_every_refusal_takes_its_words_from_the_message_tables() -> None:
    found = english_raises()
    assert not found, (
        f"{len(found)} refusals raised with an English literal; give each a key in "
        "flower/core/texts/en.py and zh.py and raise it with text(key, ...):\n" + "\n".join(found)
    )


def test_the_check_sees_an_english_raise() -> None:
    """The scan itself: a subclass two levels down, raised with an f-string, is found."""
    tree = ast.parse(
        "class A(FlowerboxError): ...\nclass B(A): ...\ndef f(x):\n    raise B(f'no {x} here')\n"
    )
    assert refusal_classes([tree]) >= {"A", "B"}
    raise_node = next(n for n in ast.walk(tree) if isinstance(n, ast.Raise))
    assert isinstance(raise_node.exc, ast.Call)
    assert is_sentence(raise_node.exc.args[0])
