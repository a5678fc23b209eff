"""The one error of the session stores.

Tree::

    FlowerError (flower.errors)
    └── StoreError      the sessions.db file cannot be used as it is (not a database,
                        a foreign or newer schema, a network filesystem, a damaged file,
                        a write lock that never came free)

A caller-side bug (a session id with a slash in it, a negative policy number) raises
``ValueError`` instead: that is a mistake in code, not in a file on disk.
"""

from __future__ import annotations

from pathlib import Path

from flower import text
from flower.errors import FlowerError

__all__ = ["StoreError"]


class StoreError(FlowerError):
    """The session database at ``path`` cannot be used; ``fix`` says what to do about it.

    The file itself is never changed on the way to this error: a store refuses before
    its first write.
    """

    def __init__(self, path: str | Path, problem: str, fix: str) -> None:
        self.path = Path(path)
        self.problem = problem
        self.fix = fix
        super().__init__(text("store.message", path=self.path, problem=problem, fix=fix))
