"""The detached agent's output on the host, capped: a box that prints for hours (or prints a
gigabyte at once) costs the host at most 2 x OUTPUT_KEPT bytes (issue 37, D2).

    with CappedLog(state_dir / records.OUTPUT) as log:
        box.wait(log.write)

Past OUTPUT_KEPT bytes the log is renamed to `<name>.1` (replacing the previous one) and
begun again, so the latest output is always kept whole and `flowerbox logs` still finds its
tail in `<name>`. The files are also counted in the run's disk budget (flowerbox.runs.diskwatch
watches the run's host-only folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

OUTPUT_KEPT = 16 * 1024 * 1024


class CappedLog:
    """Appends to `path`, rotating it to `path.1` each time it would pass `cap` bytes."""

    def __init__(self, path: Path, *, cap: int = OUTPUT_KEPT) -> None:
        self.path = path
        self.cap = cap
        self._handle: BinaryIO = path.open("ab")

    def write(self, chunk: bytes) -> None:
        while chunk:
            room = self.cap - self._handle.tell()
            if room <= 0:
                self._rotate()
                continue
            self._handle.write(chunk[:room])
            chunk = chunk[room:]
        self._handle.flush()

    def _rotate(self) -> None:
        self._handle.close()
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        self._handle = self.path.open("ab")

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> CappedLog:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
