"""flower's public signatures as text: every name of `flower.__all__`, and the public methods
and properties of its classes (inherited ones too, where flower defines them).

The record, signatures.json beside this file, is a snapshot of the code, not the spec (the
seeds' signatures are seed_table.py, written from the pages): test_signatures.py compares it
with the code, so a signature that drifts fails with a diff. After a deliberate change
(and, for a name the seeds show, its seed_table entry), re-record:

    PYTHONPATH=. python -m tests.conformance.signatures --write

Without --write this prints the differences and exits 1 when there are any.
"""

from __future__ import annotations

import difflib
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import flower

RECORD = Path(__file__).with_name("signatures.json")
WRITE = "PYTHONPATH=. python -m tests.conformance.signatures --write"


class _Shown:
    """An annotation written in the source as a string, shown without its quotes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _unquoted(annotation: Any) -> Any:
    return _Shown(annotation) if isinstance(annotation, str) else annotation


def signature(function: Any) -> str:
    """`(params) -> return` with the source's annotations as written."""
    sig = inspect.signature(function)
    parameters = [p.replace(annotation=_unquoted(p.annotation)) for p in sig.parameters.values()]
    shown = sig.replace(parameters=parameters, return_annotation=_unquoted(sig.return_annotation))
    return str(shown)


def _member(value: Any) -> str | None:
    """How a class attribute is recorded; None for what is no method (data, fields)."""
    if isinstance(value, property):
        returns = (value.fget.__annotations__ if value.fget else {}).get("return", "?")
        return f"property -> {returns}"
    if isinstance(value, classmethod | staticmethod):
        return f"{type(value).__name__} {signature(value.__func__)}"
    if inspect.iscoroutinefunction(value):
        return f"async def {signature(value)}"
    if inspect.isfunction(value):
        return f"def {signature(value)}"
    return None


def _class(name: str, cls: type) -> dict[str, str]:
    """`class(bases) (constructor)`, then one entry per method and property."""
    bases = ", ".join(base.__qualname__ for base in cls.__bases__)
    try:
        constructor = f" {signature(cls)}"
    except ValueError:  # a built-in's own, e.g. an exception's (*args)
        constructor = ""
    found = {name: f"class({bases}){constructor}"}
    for klass in reversed(cls.__mro__):  # a subclass's definition overrides its base's
        if not klass.__module__.startswith("flower"):
            continue
        for attr, value in vars(klass).items():
            shown = None if attr.startswith("_") else _member(value)
            if shown is not None:
                found[f"{name}.{attr}"] = shown
    return found


def _entry(name: str, value: Any) -> dict[str, str]:
    if inspect.isclass(value):
        return _class(name, value)
    value = inspect.unwrap(value)  # a cached function is recorded as the function
    if inspect.iscoroutinefunction(value):
        return {name: f"async def {signature(value)}"}
    if inspect.isfunction(value):
        return {name: f"def {signature(value)}"}
    if get_origin(value) is Literal:
        return {name: f"Literal{list(get_args(value))}"}
    kind = "Path" if isinstance(value, Path) else type(value).__name__  # PosixPath: Path
    return {name: kind}  # a constant: its type, not its value


def current() -> dict[str, str]:
    """Every public signature of flower now, sorted by name."""
    found: dict[str, str] = {}
    for name in flower.__all__:
        found.update(_entry(name, getattr(flower, name)))
    return dict(sorted(found.items()))


def recorded() -> dict[str, str]:
    loaded: dict[str, str] = json.loads(RECORD.read_text(encoding="utf-8"))
    return loaded


def render(signatures: dict[str, str]) -> str:
    return json.dumps(signatures, ensure_ascii=False, indent=1) + "\n"


def drift() -> str:
    """A unified diff from the record to the code ("" when they agree)."""
    lines = difflib.unified_diff(
        render(recorded()).splitlines(keepends=True),
        render(current()).splitlines(keepends=True),
        fromfile="recorded (tests/conformance/signatures.json)",
        tofile="the code now",
    )
    return "".join(lines)


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        RECORD.write_text(render(current()), encoding="utf-8")
        print(f"wrote {RECORD}")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    diff = drift()
    sys.stdout.write(diff)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
