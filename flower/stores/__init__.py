"""Session stores: SQLite persistence and the trim/prune views handed back on load."""

from flower.stores.ephemeral import is_ephemeral
from flower.stores.errors import StoreError
from flower.stores.sqlite import SqliteSessionStore

__all__ = ["SqliteSessionStore", "StoreError", "is_ephemeral"]
