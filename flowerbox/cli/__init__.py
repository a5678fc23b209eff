"""The `flowerbox` command line: typer only, on top of the library. Nothing imports it."""
