"""Register a runtime in the engine's daemon.json (docker/gvisor.sh runs it as root):

    python3 docker/daemon-runtime.py CONFIG NAME BINARY ARGS_JSON

Every other key stays as it was; the file as the user had it before the first registration is
kept beside it as CONFIG.flowerbox-bak, which a later registration never overwrites (a second
run of gvisor.sh once replaced the user's copy with flowerbox's own file); the new file
replaces the old atomically. A file that is not a JSON object is left as it is: exit 1, and
the line says why.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def registered(text: str, name: str, binary: str, args: list[str]) -> dict[str, Any]:
    """The configuration `text` holds, with runtime `name` set (the rest as it was).

    Raises:
        ValueError: `text` is not a JSON object whose `runtimes` is an object (json's own
            error, a ValueError too, for what is not JSON).
    """
    config = json.loads(text) if text.strip() else {}
    if not isinstance(config, dict) or not isinstance(config.get("runtimes", {}), dict):
        raise ValueError("expected an object with a `runtimes` object")
    config.setdefault("runtimes", {})[name] = {"path": binary, "runtimeArgs": args}
    return config


def keep_original(path: Path, text: str) -> None:
    """The user's file, once: a backup already there is the older, truer one."""
    if text:
        try:
            with open(f"{path}.flowerbox-bak", "x", encoding="utf-8") as backup:
                backup.write(text)
        except FileExistsError:
            pass


def replace_atomically(path: Path, config: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".daemon.json.")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(config, out, indent=2)
        out.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    path, name, binary, args = Path(argv[0]), argv[1], argv[2], json.loads(argv[3])
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    try:
        config = registered(text, name, binary, args)
    except ValueError as exc:
        print(
            f"gvisor.sh: error: {path}: {exc}: fix it first; it was left as it is", file=sys.stderr
        )
        return 1
    keep_original(path, text)
    replace_atomically(path, config)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
