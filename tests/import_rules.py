"""The import rules import-linter cannot say (pyproject.toml holds the ones it can):

- the agent's container runs flowerbox.inside on a bare Python: the standard library and
  flowerbox.wire only;
- flowerbox uses flower through its public API only: `flower`, `flower.testing`, `flower.cli`;
- no module imports another's private name (`from x import _y`, or `x._y` on an imported
  module): a private name is free to change without a look outside its module;
- an import inside a function says why on its line or the one above (`# lazy: ...`), so the
  import graph is visible at the top of each module and a hidden one is a decision.

`python -m tests.import_rules` prints each violation and exits 1 (`make lint` runs it).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flower", "flowerbox")
FLOWER_PUBLIC = frozenset({"flower", "flower.testing", "flower.cli"})
INSIDE_MAY_IMPORT = frozenset({"flowerbox", "flowerbox.wire"})
WHY = "lazy:"
UNSAID = "import in a function without `# lazy: why`"


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    rule: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.what}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module of a `from ... import`, relative ones included."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _says_why(lines: list[str], lineno: int) -> bool:
    """`# lazy: ...` on the import's line, or in the comment above it (over the imports of
    the same group)."""
    if WHY in lines[lineno - 1]:
        return True
    for line in reversed(lines[: lineno - 1]):
        text = line.strip()
        if text.startswith("#") and WHY in text:
            return True
        if not text.startswith(("#", "import ", "from ")):
            return False
    return False


def _in_function(tree: ast.AST) -> set[int]:
    """The ids of import nodes that sit inside a function body."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    inside.add(id(sub))
    return inside


def _type_checking_only(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            for sub in ast.walk(node):
                found.add(id(sub))
    return found


def check_file(path: Path, root: Path) -> Iterator[Violation]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    in_function = _in_function(tree)
    typing_only = _type_checking_only(tree)
    imported_modules: dict[str, str] = {}  # local name -> module, for `x._y`
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    imported_modules[alias.asname or alias.name.split(".")[0]] = alias.name
        else:
            source_module = _resolve(node, module, is_package)
            targets = [source_module]
            for alias in node.names:
                if _private(alias.name) and source_module.split(".")[0] in PACKAGES:
                    yield Violation(
                        path, node.lineno, "private name", f"{alias.name} from {source_module}"
                    )
                if source_module.split(".")[0] in PACKAGES:
                    imported_modules[alias.asname or alias.name] = f"{source_module}.{alias.name}"
        for target in targets:
            if module.startswith("flowerbox.inside") and id(node) not in typing_only:
                top = target.split(".")[0]
                if not (
                    target in INSIDE_MAY_IMPORT
                    or top in sys.stdlib_module_names
                    or target.startswith("flowerbox.inside")
                ):
                    yield Violation(path, node.lineno, "inside: stdlib and wire only", target)
            if (
                module.startswith("flowerbox")
                and target.split(".")[0] == "flower"
                and target not in FLOWER_PUBLIC
            ):
                yield Violation(path, node.lineno, "flower's public API only", target)
        if id(node) in in_function and not _says_why(lines, node.lineno):
            yield Violation(path, node.lineno, UNSAID, lines[node.lineno - 1].strip())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in imported_modules
        ):
            yield Violation(path, node.lineno, "private name", f"{node.value.id}.{node.attr}")


def violations(root: Path = ROOT) -> list[Violation]:
    found: list[Violation] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            found.extend(check_file(path, root))
    return found


def main() -> int:
    found = violations()
    for violation in found:
        print(violation)
    print(f"import rules: {len(found)} violation(s)" if found else "import rules: kept")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
