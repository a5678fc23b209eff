"""Every refusal a person reads is in the run's language (issue 36 item 5): an error flower
or flowerbox raises on purpose (a FlowerError or FlowerboxError, whose message the CLIs print
with exit 2, and the broker and the gateway answer or log) takes its words from the message
tables (`text(key, ...)`), never from an English literal at the raise site; so does what the
command lines print beside their results (`wrote ...`, `created ...`, `stopping ...`).

Read from the source, so a new raise site with an English sentence fails here before a zh
user meets it. A ValueError or TypeError that is not one of these is a bug, shown with its
traceback, and stays English (flower.errors).
"""

from __future__ import annotations

import ast
import re
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


# What the command lines print for a person to read (not the logs of the box's and the
# broker's daemons: flowerbox.inside, the gateway, the keeper and its guard, the broker's own
# lines, which stay English for whoever reads the logs; docs/decisions.md).
SAID_IN = ("flower/cli/", "flowerbox/cli/", "flowerbox/runs/launch.py", "flowerbox/box/prepare.py")
PRINTERS = frozenset({"print", "echo", "secho"})
NAMES = frozenset({"flower", "flowerbox", "claude", "code", "agent", "sdk", "hello", "py", "ok"})
"""Names (of programs, of the demo's file), not English."""


def english_lines() -> list[str]:
    """`path:line` of each print/echo in the command lines' code with a literal sentence."""
    found = []
    for path, tree in sources():
        if not str(path.relative_to(ROOT)).startswith(SAID_IN):
            continue
        for node in ast.walk(tree):
            printed = isinstance(node, ast.Call) and name_of(node.func) in PRINTERS
            if printed and node.args and words_in(node.args[0]):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def words_in(node: ast.expr) -> bool:
    """Whether a literal (an f-string's fixed parts) holds English words, rich's markup tags
    aside: two words, or one of four letters or more that is no name (`f"wrote {path}"`), where
    `f"flowerbox {__version__}"` holds none."""
    if isinstance(node, ast.JoinedStr):
        parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        parts = [node.value]
    else:
        return False
    said = re.sub(r"\[/?[a-z ]*\]", " ", " ".join(str(part) for part in parts))
    words = [w for w in re.findall(r"[A-Za-z]{2,}", said) if w.lower() not in NAMES]
    return len(words) >= 2 or any(len(word) >= 4 for word in words)


def test_what_the_command_lines_print_takes_its_words_from_the_message_tables() -> None:
    found = english_lines()
    assert not found, (
        f"{len(found)} lines printed from an English literal; give each a key in "
        "flower/core/texts/en.py and zh.py and print text(key, ...):\n" + "\n".join(found)
    )


def test_the_check_sees_an_english_line_and_not_a_version() -> None:
    said = ast.parse('f"wrote {path}"', mode="eval").body
    version = ast.parse('f"[bold]flowerbox[/] {__version__}"', mode="eval").body
    assert words_in(said) and not words_in(version)


# What the self-test judges, the egress proxy decides and the gateway refuses for the API to
# fetch: each verdict's `why` (`flowerbox selftest`, doctor's gateway and proxy lines), each
# allow/deny reason (the 403 body a process in the box reads, the egress log) and each thing
# a fetch refusal names, built where these calls are made.
JUDGED_IN = (
    "flowerbox/selftest/verdicts.py",
    "flowerbox/kube/selftest.py",
    "flowerbox/sidecar/egress.py",
    "flowerbox/sidecar/reach.py",
)
JUDGED_BY = frozenset({"Verdict", "Decision", "Reach", "_verdict", "append"})
NAMED_FIRST = frozenset({"Verdict", "_verdict"})
"""Calls whose first argument is a probe's or a check's name (`"forged_record"`), not English."""


def english_judgements() -> list[str]:
    """`path:line` of each verdict, decision or reach (or a problem appended to one, or an
    (ok, why) returned) made with a literal sentence."""
    found = []
    for path, tree in sources():
        if not str(path.relative_to(ROOT)).startswith(JUDGED_IN):
            continue
        for node in ast.walk(tree):
            if any(judged_words(said) for said in judged(node)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def judged(node: ast.AST) -> list[ast.expr]:
    """What `node` says as a verdict's why, a decision's reason, a reach or a problem."""
    if isinstance(node, ast.Call) and name_of(node.func) in JUDGED_BY:
        args = node.args[1:] if name_of(node.func) in NAMED_FIRST else node.args
        return [*args, *(k.value for k in node.keywords)]
    if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
        return node.value.elts
    return []


def judged_words(node: ast.expr) -> bool:
    """English words in a literal, or in either branch of a conditional one."""
    if isinstance(node, ast.IfExp):
        return judged_words(node.body) or judged_words(node.orelse)
    return words_in(node)


def test_what_the_self_test_and_the_proxy_judge_takes_its_words_from_the_message_tables() -> None:
    found = english_judgements()
    assert not found, (
        f"{len(found)} verdicts, decisions or reaches made from an English literal; give each "
        "a key in flower/core/texts/en.py and zh.py and say it with text(key, ...):\n"
        + "\n".join(found)
    )


def test_the_check_sees_an_english_verdict_and_not_a_probes_name() -> None:
    english = ast.parse('Verdict("udp", False, f"a datagram reached {where}")', mode="eval").body
    named = ast.parse('Verdict("forged_record", ok, why)', mode="eval").body
    assert any(judged_words(said) for said in judged(english))
    assert not any(judged_words(said) for said in judged(named))
    either = ast.parse('"refused" if sudo else text("verdict.sudo_absent")', mode="eval").body
    assert judged_words(either)
