"""Python's cyclic garbage collector off while a command line starts (issue 31).

Starting `flower` or `flowerbox` imports typer, rich and the command's modules: tens of
thousands of objects, none of them garbage, which the collector walks again each time
enough new ones pile up: ~12-15 ms of CPU of `flowerbox --help` and `flower --help` (a
tenth of them; bench.cli). `pause` turns it off at the console script's entry; `resume`
freezes what was built so far (out of the collector's sight for good: modules, classes and
functions that live as long as the process) and turns it back on once the command is
found, before it runs, so a long run collects as always. A help page, the version or a
refused line ends the process before that. An app called in a process that never paused
(a test, a program) is left as it is.
"""

from __future__ import annotations

import gc


def pause() -> None:
    """No collection until `resume` (the console script's first line)."""
    gc.disable()


def resume() -> None:
    """What the start built frozen, and the collector on again (once; only if paused)."""
    if gc.isenabled():
        return
    gc.freeze()
    gc.enable()
