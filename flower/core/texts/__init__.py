"""The texts flower shows, one table per language with the same keys (flower.core.lang)."""
