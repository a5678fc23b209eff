"""`python -m flowerbox` runs the same CLI as the `flowerbox` console script."""

from flowerbox.cli import main

main()
