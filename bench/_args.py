"""A benchmark's command line: its options, and `--help` from its own docstring; anything
else is refused (exit 2). A benchmark that took every argument for nothing ran whole on
`--help`: minutes of a shared machine, and for bench.many 25 real runs."""

from __future__ import annotations

import argparse
from typing import Any


def parse(module: str, doc: str | None, *options: tuple[str, dict[str, Any]]) -> argparse.Namespace:
    """`python -m MODULE`'s arguments: `--smoke`, then `options` (argparse's name and
    keywords each)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: does it still run and print its figures?"
    )
    for name, keywords in options:
        parser.add_argument(name, **keywords)
    return parser.parse_args()
