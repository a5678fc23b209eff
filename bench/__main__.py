"""Run every benchmark module in this folder, one after the other."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    failures = 0
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        print(f"\n=== bench.{info.name} ===", flush=True)
        module = importlib.import_module(f"bench.{info.name}")
        failures += 0 if module.main() == 0 else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
