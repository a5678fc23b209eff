"""The broker's control protocol, as flowerbox on the host speaks it: the socket's name, the
longest line either side reads, and what a run registers with. Apart from the broker's
servers (flowerbox.broker.server) so that a run that only asks whether a broker runs loads
none of them (issue 31: every `flowerbox "ask"` asks).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CONTROL_LIMIT", "CONTROL_SOCKET", "Registration"]

CONTROL_SOCKET = "control.sock"
CONTROL_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Registration:
    """What flowerbox tells the broker of a new run. `allow` None: no egress proxy
    (`--net open`)."""

    run_id: str
    socket_dir: Path
    gateway_dir: Path
    budget_usd: float | None = None
    allow: tuple[str, ...] | None = ()
    allow_api_fetch: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "register",
            "run_id": self.run_id,
            "socket_dir": str(self.socket_dir),
            "gateway_dir": str(self.gateway_dir),
            "budget_usd": self.budget_usd,
            "allow": None if self.allow is None else list(self.allow),
            "allow_api_fetch": self.allow_api_fetch,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Registration:
        """Raises KeyError, TypeError or ValueError for what is no registration."""
        allow, budget = data.get("allow"), data.get("budget_usd")
        return cls(
            run_id=str(data["run_id"]),
            socket_dir=Path(data["socket_dir"]),
            gateway_dir=Path(data["gateway_dir"]),
            budget_usd=None if budget is None else float(budget),
            allow=None if allow is None else tuple(str(entry) for entry in allow),
            allow_api_fetch=data.get("allow_api_fetch") is True,
        )
