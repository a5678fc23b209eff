"""Session stores: SQLite persistence and the trim/prune views handed back on load."""

from flower.stores.ephemeral import is_ephemeral
from flower.stores.errors import StoreError
from flower.stores.prune import PrunePolicy, PruningSessionStore
from flower.stores.sqlite import SqliteSessionStore
from flower.stores.trim import EphemeralPolicy, TrimmingSessionStore, TrimPolicy

__all__ = [
    "EphemeralPolicy",
    "PrunePolicy",
    "PruningSessionStore",
    "SqliteSessionStore",
    "StoreError",
    "TrimPolicy",
    "TrimmingSessionStore",
    "is_ephemeral",
]
