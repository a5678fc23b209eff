"""Offline resilience: probe, wait, back off, and resume the same session instead of restarting.

Two retry layers (DESIGN.md, Decisions): the CLI retries by itself, and flower sets its count
low (`cli_retries`, passed as CLAUDE_CODE_MAX_RETRIES) so a blip is absorbed inside the
session while a real outage or a bad key reaches this layer within seconds. Here a failure is
classified (from what the SDK reported: the HTTP status, the error kind, the terminal
reason; only without them from the text, fatal first: a 401 text that also says
"connection" must stop at once), the
network is probed for free (DNS + TCP, no HTTP, no credentials, not a cent), and the step is
resumed with `resume_prompt`, which deliberately carries no error detail: the model needs to
know it was cut off, not whether it was ENOTFOUND or 503 (that goes to the manifest).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from flower.core import lang

Kind = Literal["fatal", "retry", "other"]


# What the SDK reports decides when it reports anything: the failing call's HTTP status
# (ResultMessage/ResultError.api_error_status), the AssistantMessage's error kind, the
# result's terminal_reason.
RETRY_STATUSES = frozenset({408, 429})  # and every 5xx; any other 4xx is fatal
FATAL_KINDS = frozenset({"authentication_failed", "billing_error", "invalid_request"})
RETRY_KINDS = frozenset({"rate_limit", "server_error"})
FATAL_REASONS = frozenset({"max_turns", "budget_exhausted", "prompt_too_long"})

# Without such data, the text. Checked first: waiting cannot fix these. A 401 text often
# also says "connection".
FATAL = re.compile(
    r"\b40[13]\b|invalid (?:x-)?api.?key|authenticat|unauthori[sz]ed|forbidden|permission_error"
    r"|credit balance|billing|maximum budget|budget (?:exhausted|exceeded)"
    r"|maximum number of turns|API Error: 400|invalid_request"
    # The SDK could not start the CLI here (its wordings): a local fault no wait repairs.
    r"|Failed to start Claude Code|Working directory does not exist|Claude Code not found",
    re.IGNORECASE,
)
RETRY = re.compile(
    r"\b(?:429|500|502|503|504|529)\b|overloaded|rate.?limit|server.?side|internal server error"
    r"|connection|ECONN\w+|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EPIPE|socket hang up|timed? ?out"
    r"|network|fetch failed|mid-response|unreachable",
    re.IGNORECASE,
)


def classify(
    text: str, *, status: int | None = None, kind: str | None = None, reason: str | None = None
) -> Kind:
    """ "fatal" (stop now), "retry" (a network or server fault: wait, back off, resume) or
    "other" (unknown, e.g. the CLI process died: back off and resume, no network wait).

    The SDK's data decides first: `status` (the HTTP status: 5xx, 408 and 429 retry, other
    4xx are fatal), then `kind` (AssistantMessage.error: "rate_limit", "server_error" retry;
    "authentication_failed", "billing_error", "invalid_request" are fatal), then `reason`
    (the terminal_reason: turn and budget limits are fatal). Only when none of them says
    anything is `text` read, fatal wordings first.
    """
    if status is not None and status >= 400:
        return "retry" if status >= 500 or status in RETRY_STATUSES else "fatal"
    if kind in FATAL_KINDS or reason in FATAL_REASONS:
        return "fatal"
    if kind in RETRY_KINDS:
        return "retry"
    if FATAL.search(text):
        return "fatal"
    if RETRY.search(text):
        return "retry"
    return "other"


@dataclass
class Resilience:
    """How a step survives faults. Defaults give the seeds' numbers: backoffs of ~4 s, ~8 s,
    16, 32, 64, then capped at 120 s (±25 % jitter each), and an offline wait of 60 min."""

    enabled: bool = True
    max_attempts: int = 8
    base_delay: float = 4.0
    max_delay: float = 120.0
    max_offline_wait: float = 3600.0
    probe_interval: float = 15.0
    probe_timeout: float = 5.0
    cli_retries: int = 2
    resume_prompt: str | None = None  # None: the seeds' text, in the current language

    def resume_text(self) -> str:
        """What a session resumed after an outage is told."""
        return self.resume_prompt or lang.text("resilience.resume")

    def delay_for(self, attempt: int) -> float:
        """Backoff after failed attempt number `attempt` (1-based), with ±25 % jitter."""
        base = min(self.base_delay * 2 ** (attempt - 1), self.max_delay)
        return float(base * (0.75 + random.random() * 0.5))

    def env(self) -> dict[str, str]:
        """What the CLI is told: its own retries, low (only when this layer is on)."""
        return {"CLAUDE_CODE_MAX_RETRIES": str(self.cli_retries)} if self.enabled else {}

    async def wait_online(self, notify: Callable[[str], None] | None = None) -> bool:
        """Wait until the API endpoint answers a probe: True at once if it does, True when it
        comes back, False once `max_offline_wait` has passed. One line when it goes
        unreachable, one when it is back, nothing in between."""
        # lazy: a coroutine runs in a loop, so asyncio is loaded by then; a command that only
        # reads the policy's defaults (its --retries help) does not load it (issue 31)
        import asyncio

        target = probe_target()
        if await self.probe(target):
            return True
        name = _host_port(target)
        if notify:
            minutes = f"{self.max_offline_wait / 60:.0f}"
            notify(lang.text("resilience.offline", name=name, minutes=minutes))
        deadline = time.monotonic() + self.max_offline_wait
        while time.monotonic() < deadline:
            await asyncio.sleep(min(self.probe_interval, max(0.0, deadline - time.monotonic())))
            if await self.probe(target):
                if notify:
                    notify(lang.text("resilience.back", name=name))
                return True
        return False

    async def probe(self, target: tuple[str, int] | str) -> bool:
        """One probe: an HTTP health URL (inside flowerbox: the gateway knows whether the real
        upstream is up), else DNS + TCP connect to host:port. Any failure = unreachable."""
        # lazy: as in wait_online
        import asyncio

        if isinstance(target, str):
            return await asyncio.to_thread(_health_ok, target, self.probe_timeout)
        host, port = target
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), timeout=self.probe_timeout
            )
        except (OSError, TimeoutError, socket.gaierror):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True


HEALTH_URL_ENV = "FLOWER_HEALTH_URL"


def probe_target() -> tuple[str, int] | str:
    """What wait_online probes: $FLOWER_HEALTH_URL if set (flowerbox's gateway), else the
    host:port of ANTHROPIC_BASE_URL (not the public host: a self-hosted gateway's
    reachability is what matters), else api.anthropic.com:443."""
    if health := os.environ.get(HEALTH_URL_ENV):
        return health
    url = urlsplit(os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com")
    port = url.port or (443 if url.scheme == "https" else 80)
    return (url.hostname or "api.anthropic.com", port)


def _host_port(target: tuple[str, int] | str) -> str:
    """The `<host>:<port>` the outage lines name (003:251), a health URL's included."""
    if isinstance(target, str):
        url = urlsplit(target)
        target = (url.hostname or target, url.port or (443 if url.scheme == "https" else 80))
    return f"{target[0]}:{target[1]}"


def _health_ok(url: str, timeout: float) -> bool:
    # lazy: an HTTP client for the rare probe of a health URL costs every start of the CLIs
    # (flower.cli.options reads this module's defaults)
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False
