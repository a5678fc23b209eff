"""What the fake model answers: content blocks, usage numbers and injected faults.

A `Reply` is data. The server turns it into the SSE sequence the Claude Code CLI expects (or a
JSON body for the CLI's non-streaming fallback). A reply may carry a `Fault`; a fault with
`times=N` is injected the first N times that reply is due and the reply is served after that,
which is how "fails twice, then succeeds" and "drops until the CLI gives up" are scripted.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def new_tool_id() -> str:
    """A unique `toolu_*` id (the CLI needs unique tool ids within a session)."""
    with _ids_lock:
        return f"toolu_fake{next(_ids):06d}"


@dataclass(frozen=True)
class Text:
    """A text block."""

    text: str


@dataclass(frozen=True)
class Thinking:
    """A thinking block (sent with a fake signature; the CLI keeps it in the transcript)."""

    thinking: str
    signature: str = "fake-signature"


@dataclass(frozen=True)
class ToolUse:
    """A tool_use block: the CLI really runs the tool and sends the result back."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_tool_id)


Block = Text | Thinking | ToolUse


@dataclass(frozen=True)
class Usage:
    """Token counts reported in message_start. None means "estimate from the request"."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass(frozen=True)
class Fault:
    """Something that goes wrong instead of (or in the middle of) a reply.

    kind:
        "http": answer `status` with an Anthropic-shaped error body (`error_type`, `message`),
            plus `retry-after` when given.
        "drop": start the stream, send `after_blocks` complete content blocks, then cut the
            connection without a message_stop.
        "stream_error": like drop, but send an SSE `error` event before closing.
        "reset": close the connection before any response (a network blip: no status line).
    A drop or reset of a non-streaming request closes it without a response.
    times: inject it this many times, then serve the reply normally; None = every time.
    """

    kind: Literal["http", "drop", "stream_error", "reset"]
    status: int = 500
    error_type: str = "api_error"
    message: str = "Internal server error"
    retry_after: float | None = None
    after_blocks: int = 0
    times: int | None = None


@dataclass(frozen=True)
class Reply:
    """One answer of the fake model.

    stop_reason defaults to "tool_use" when a tool_use block is present, else "end_turn".
    `delay` seconds are waited before the first byte is sent; `think` seconds after the
    stream opened (message_start sent), as a long-thinking model streams nothing for a while.
    """

    blocks: tuple[Block, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    model: str | None = None
    delay: float = 0.0
    think: float = 0.0
    fault: Fault | None = None

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"

    @property
    def tool_ids(self) -> tuple[str, ...]:
        return tuple(b.id for b in self.blocks if isinstance(b, ToolUse))

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.blocks if isinstance(b, Text))


# --- constructors: the short forms scripts are written with -------------------------------


def text(
    content: str,
    *,
    usage: Usage | None = None,
    delay: float = 0.0,
    fault: Fault | None = None,
) -> Reply:
    """A plain text answer that ends the turn."""
    return Reply(blocks=(Text(content),), usage=usage or Usage(), delay=delay, fault=fault)


def tool(
    name: str,
    input: dict[str, Any] | None = None,
    *,
    say: str = "",
    id: str | None = None,
    usage: Usage | None = None,
    delay: float = 0.0,
    fault: Fault | None = None,
) -> Reply:
    """An answer that calls one tool, optionally preceded by a line of text."""
    call = ToolUse(name, dict(input or {}), **({"id": id} if id else {}))
    blocks: tuple[Block, ...] = ((Text(say),) if say else ()) + (call,)
    return Reply(blocks=blocks, usage=usage or Usage(), delay=delay, fault=fault)


def http_error(
    status: int,
    message: str | None = None,
    *,
    retry_after: float | None = None,
    times: int | None = None,
) -> Fault:
    """An HTTP error with the error type the real API uses for that status."""
    error_type, default_message = _HTTP_ERRORS.get(status, ("api_error", f"HTTP {status}"))
    return Fault(
        "http",
        status=status,
        error_type=error_type,
        message=message or default_message,
        retry_after=retry_after,
        times=times,
    )


def prompt_too_long(
    tokens: int = 1_050_000, maximum: int = 1_000_000, *, times: int | None = None
) -> Fault:
    """The 400 the CLI treats as a full context (terminal on a first turn)."""
    return http_error(400, f"prompt is too long: {tokens} tokens > {maximum} maximum", times=times)


def drop(after_blocks: int = 0, *, times: int | None = None) -> Fault:
    """Cut the connection mid-stream after `after_blocks` complete blocks."""
    return Fault("drop", after_blocks=after_blocks, times=times)


def reset(*, times: int | None = None) -> Fault:
    """Reset the connection before answering at all (no status line, no body)."""
    return Fault("reset", times=times)


def stream_error(after_blocks: int = 0, *, times: int | None = None) -> Fault:
    """Send an SSE `error` event (overloaded) mid-stream, then close."""
    return Fault(
        "stream_error",
        error_type="overloaded_error",
        message="Overloaded",
        after_blocks=after_blocks,
        times=times,
    )


_HTTP_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource"),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes"),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}
