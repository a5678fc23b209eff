"""flower: long-horizon work with Claude Code through claude-agent-sdk."""

__version__ = "0.1.0"

__all__ = ["__version__"]
