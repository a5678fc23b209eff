"""The provenance note's text, one format wherever it is written: on the host after a local
run (flowerbox.runs.provenance) and by the broker's git relay after a cluster run's push
(flowerbox.broker.gitnotes).

    Provenance(run="...", image="flowerbox:dev sha256:...", network="...", spend=Spend(...)).text()

One `key: value` line each, in a fixed order, so that `git log --notes=flowerbox` reads the
same whichever wrote it; a fact the writer does not know is `unknown`, never left out. A
value is one line whatever it holds (a model name is what the agent asked for): anything
unprintable in it, a line break included, is shown as a space.
Standard library only: the broker's process imports it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowerbox import __version__

__all__ = ["IDENTITY", "NOTES_REF", "Provenance", "Spend", "allowlist"]

NOTES_REF = "refs/notes/flowerbox"
IDENTITY = ("-c", "user.name=flowerbox", "-c", "user.email=flowerbox@localhost")
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Spend:
    """What a run spent: `usd` None when nothing recorded it."""

    usd: float | None
    requests: int = 0
    models: tuple[str, ...] = ()


@dataclass(frozen=True)
class Provenance:
    """The facts of one run a note gives; `more` are the writer's own lines, last."""

    run: str
    image: str
    network: str
    spend: Spend
    flower: str = __version__
    claude_code: str = UNKNOWN
    box: str = UNKNOWN
    exit: str = UNKNOWN
    more: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        models = ", ".join(sorted(self.spend.models)) or "none recorded"
        usd = self.spend.usd
        cost = UNKNOWN if usd is None else f"${usd:.6f} ({self.spend.requests} requests)"
        lines = [
            ("flowerbox-run", self.run),
            ("image", self.image),
            ("flower", self.flower),
            ("claude-code", self.claude_code),
            ("model", models),
            ("network", self.network),
            ("box", self.box),
            ("cost", cost),
            ("exit", self.exit),
            *self.more,
        ]
        return "".join(f"{key}: {_one_line(value)}\n" for key, value in lines)


def allowlist(allow: tuple[str, ...] | list[str]) -> str:
    """A network held to `allow`, as a note says it (a local run's --allow, a cluster
    run's token Secret)."""
    return f"allowlist: {', '.join(allow)}" if allow else "allowlist: empty (no network)"


def _one_line(value: str) -> str:
    return "".join(c if c.isprintable() else " " for c in value)
