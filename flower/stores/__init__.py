"""Session stores: SQLite persistence and the trim/prune views handed back on load."""
