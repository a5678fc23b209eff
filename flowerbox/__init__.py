"""flowerbox: run flower unattended in a hardened container, credentials kept outside it."""

from flower import __version__

__all__ = ["__version__"]
