"""Workflows: ordered steps, gates and what passes between them."""
