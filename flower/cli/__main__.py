"""`python -m flower.cli` runs the same app as the `flower` console script."""

from flower.cli.app import main

main()
