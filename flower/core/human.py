"""HumanChannel: how a model asks a human, and how a human speaks up unprompted.

The model sees an in-process MCP server with two tools (seed 004):

    mcp__human__ask     question, options? -> blocks until answered, declined or timed out;
                        returns the answer, or one of the fixed texts below
    mcp__human__inbox   never blocks: the human's unread messages (marked read), or a line
                        saying there are none

The UI sees Events of kind "ask" and a few methods callable from any thread (answer, decline,
send). payload["kind"] tells the two roles of the kind apart: "question" (one ask: an "asked"
event, then one with its outcome; an ask closed at once has only the outcome) and "mail"
(the human's own words: "sent", then "read" once the model has read them).

Outcomes (Ask.state): answered, declined, timeout (nobody answered within timeout_s, or the
run stopped waiting), over_budget (max_asks used up), invalid (an empty question). The three
"0 / None" settings are easy to confuse (docs/human.md has the table):

    timeout_s=None   wait forever            timeout_s <= 0   never wait: timeout at once
    max_asks=None    no limit                max_asks=0       never ask: over_budget at once

`attach(run_dir)` adds the cross-process mailbox (flower.core.inbox): pending asks mirrored
to asks.json, answers and messages taken from files dropped in inbox/.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server

from flower.core import lang
from flower.core.events import Event
from flower.core.inbox import Mailbox, drop_answer, drop_message, pending_asks, write_asks
from flower.core.texts.zh import ZH

__all__ = [
    "DECLINED",
    "INVALID",
    "OVER_BUDGET",
    "TIMEOUT",
    "Ask",
    "AskState",
    "HumanChannel",
    "drop_answer",
    "drop_message",
    "pending_asks",
]

AskState = Literal["asked", "answered", "timeout", "declined", "over_budget", "invalid"]

TIMEOUT = ZH["human.timeout"]
"""What mcp__human__ask returns when nobody answered (the seeds' text, verbatim; the model is
shown the current language's)."""
OVER_BUDGET = ZH["human.over_budget"]
"""What mcp__human__ask returns beyond max_asks (and always with max_asks=0)."""
DECLINED = ZH["human.declined"]
"""What mcp__human__ask returns when the human declined; their reason follows, if any."""
INVALID = ZH["human.invalid"]
"""What mcp__human__ask returns for an empty question (it costs no quota)."""

SERVER = "human"


def _ask_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": lang.text("human.question_field")},
            "options": {
                "type": "array",
                "items": {"type": "string"},
                "description": lang.text("human.options_field"),
            },
        },
        "required": ["question"],
    }


_INBOX_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

logger = logging.getLogger(__name__)


@dataclass
class Ask:
    """One question put to the human, and its outcome."""

    id: str  # "q1", "q2"...
    question: str
    options: list[str] = field(default_factory=list)
    asked_at: float = field(default_factory=time.time)
    state: AskState = "asked"
    answer: str = ""  # the human's answer, or the reason they gave for declining
    closed_at: float | None = None

    @property
    def waited_s(self) -> float:
        """Seconds waited for an outcome, one decimal; frozen once the ask is closed."""
        end = time.time() if self.closed_at is None else self.closed_at
        return round(max(0.0, end - self.asked_at), 1)

    def event(self, remaining: int | None = 0) -> Event:
        """This ask as an Event; `remaining` is the quota left (None: unlimited)."""
        payload = {
            "kind": "question",
            "id": self.id,
            "state": self.state,
            "options": list(self.options),
            "answer": self.answer,
            "waited_s": self.waited_s,
            "remaining": remaining,
        }
        return Event("ask", self.question, payload=payload, raw=self)


class HumanChannel:
    """The model's two tools to reach a human, and the UI's side of them.

    Bound to the event loop it is first used in. answer / decline / send may be called from
    any thread (a TUI's stdin thread, a web handler); events are always emitted on the loop.
    """

    tool_name = f"mcp__{SERVER}__ask"
    inbox_tool_name = f"mcp__{SERVER}__inbox"

    def __init__(
        self,
        *,
        on_event: Callable[[Event], None] | None = None,
        max_asks: int | None = None,
        timeout_s: float | None = 1800.0,
        log_path: str | Path | None = None,
        amend_path: str | Path | None = None,
        over_budget_text: str | None = None,
        timeout_text: str | None = None,
        declined_text: str | None = None,
    ) -> None:
        """The three texts default to TIMEOUT, OVER_BUDGET and DECLINED in the current
        language (flower.core.lang)."""
        self.on_event = on_event  # Workflow.run wires its sink here only while this is None
        self.max_asks = max_asks
        self.timeout_s = timeout_s
        self.log_path = Path(log_path) if log_path is not None else None
        self.amend_path = Path(amend_path) if amend_path is not None else None
        self.over_budget_text = over_budget_text or lang.text("human.over_budget")
        self.timeout_text = timeout_text or lang.text("human.timeout")
        self.declined_text = declined_text or lang.text("human.declined")
        self.asks: list[Ask] = []
        self.run_dir: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()  # guards _waiting, _unread, _mails across threads
        self._waiting: dict[str, tuple[Ask, asyncio.Future[tuple[AskState, str]]]] = {}
        self._unread: list[tuple[str, str]] = []  # (mail id, text)
        self._mails = 0
        self._fresh: asyncio.Queue[Ask] | None = None
        self._mailbox: Mailbox | None = None
        # The SDK tools the server serves: ask, inbox (their handlers are what the CLI calls).
        self.tools: list[SdkMcpTool[Any]] = [
            SdkMcpTool("ask", lang.text("human.ask_tool"), _ask_schema(), self._ask_tool),
            SdkMcpTool("inbox", lang.text("human.inbox_tool"), _INBOX_SCHEMA, self._inbox_tool),
        ]
        self._server = create_sdk_mcp_server(SERVER, tools=self.tools)

    # --- what a role needs ------------------------------------------------------------------

    def mcp_servers(self) -> dict[str, Any]:
        """The spec's mcp_servers entry: key "human", so the tools are mcp__human__*."""
        return {SERVER: self._server}

    def env(self) -> dict[str, str]:
        """CLI env that OFFERS the MCP tools (by default the CLI defers them behind ToolSearch)."""
        return {"ENABLE_TOOL_SEARCH": "false"}

    @property
    def remaining(self) -> int | None:
        """Asks left under max_asks; None when unlimited."""
        if self.max_asks is None:
            return None
        used = sum(1 for ask in self.asks if ask.state not in ("over_budget", "invalid"))
        return max(0, self.max_asks - used)

    # --- asking -----------------------------------------------------------------------------

    async def ask(self, question: str, options: list[str] | None = None) -> Ask:
        """Put a question to the human and wait for its outcome (what mcp__human__ask does).

        Never raises for a bad question or an exhausted quota: the returned Ask says so.
        """
        fresh = self._bind()
        ask = Ask(f"q{len(self.asks) + 1}", question.strip(), [str(o) for o in options or []])
        remaining = self.remaining
        self.asks.append(ask)
        if not ask.question:
            return self._close(ask, "invalid", "")
        if remaining == 0:
            return self._close(ask, "over_budget", "")
        if self.timeout_s is not None and self.timeout_s <= 0:
            return self._close(ask, "timeout", "")  # unattended: no "asked" event
        future: asyncio.Future[tuple[AskState, str]] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiting[ask.id] = (ask, future)
        self._mirror()
        self._emit(ask.event(self.remaining))
        fresh.put_nowait(ask)
        try:
            async with asyncio.timeout(self.timeout_s):
                state, text = await asyncio.shield(future)
        except TimeoutError:
            if self._claim(ask.id):
                state, text = "timeout", ""
            else:  # answered in the same instant: the answer is already on its way
                state, text = await future
        except asyncio.CancelledError:
            self._claim(ask.id)  # the run stopped waiting (interrupt, stop): nobody answered
            self._close(ask, "timeout", "")
            raise
        finally:
            self._mirror()
        return self._close(ask, state, text)

    # The seeds' signature; a pull loop would otherwise wrap every call in asyncio.timeout.
    async def next_ask(self, timeout: float | None = None) -> Ask | None:  # noqa: ASYNC109
        """The next ask that needs an answer (pull model); None if none came within `timeout`."""
        fresh = self._bind()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    ask = await fresh.get()
                    if ask in self.pending():  # not answered before it was pulled
                        return ask
        except TimeoutError:
            return None

    def pending(self) -> list[Ask]:
        """The asks waiting for an answer now, oldest first."""
        with self._lock:
            return [ask for ask, _ in self._waiting.values()]

    def reply(self, ask: Ask) -> str:
        """What the ask tool returns to the model for this closed ask."""
        match ask.state:
            case "answered":
                return ask.answer
            case "declined":
                reason = ask.answer.strip()
                if not reason:
                    return self.declined_text
                return lang.text(
                    "human.declined_reason", declined=self.declined_text, reason=reason
                )
            case "over_budget":
                return self.over_budget_text
            case "invalid":
                return lang.text("human.invalid")
        return self.timeout_text

    # --- the human's side (any thread) ------------------------------------------------------

    def answer(self, ask_id: str, text: str) -> bool:
        """Answer ask `ask_id`; False if nobody waits for it (unknown, already closed)."""
        return self._resolve(ask_id, "answered", text)

    def decline(self, ask_id: str, reason: str = "") -> bool:
        """Refuse to answer ask `ask_id`; the model is told to decide by itself."""
        return self._resolve(ask_id, "declined", reason)

    def send(self, text: str) -> None:
        """The human says something unprompted: to the model's inbox, and appended to
        amend_path every time (amend() would skip words already in the file)."""
        with self._lock:
            self._mails += 1
            mail_id = f"m{self._mails}"
            self._unread.append((mail_id, text))
        self._amend(text, _added())
        self._emit_soon(_mail_event(mail_id, text, "sent"))

    def amend(self, text: str, *, label: str | None = None) -> bool:
        """Append `text` to amend_path under a dated `label` line (default 人补充, in en
        "added by the person"); never overwrites.

        Returns whether it wrote: not without amend_path, not for a blank text, not when the
        text is already in the file (a wake-up repeating the human's words).
        """
        path = self.amend_path
        if path is not None and path.exists():
            existing = path.read_text(encoding="utf-8")
            if text.strip() in existing or _quote(text) in existing:
                return False
        return self._amend(text, label or _added())

    # --- cross-process ----------------------------------------------------------------------

    def attach(self, run_dir: str | Path) -> None:
        """Mirror pending asks to <run_dir>/asks.json and watch <run_dir>/inbox/ for answers.

        Call from async code once the run dir is known; again with another dir moves there.
        The watcher runs until close() / aclose().
        """
        run_dir = Path(run_dir)
        if self.run_dir == run_dir and self._mailbox is not None:
            return
        self._bind()
        self.close()
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self._mirror()
        self._mailbox = Mailbox(run_dir, on_answer=self.answer, on_message=self.send)
        self._mailbox.start()

    def close(self) -> None:
        """Stop the inbox watcher (it ends on its own shortly); asks are unaffected."""
        if self._mailbox is not None:
            self._mailbox.stop()

    async def aclose(self) -> None:
        """Stop the inbox watcher and wait for it."""
        if self._mailbox is not None:
            await self._mailbox.aclose()

    # --- internals --------------------------------------------------------------------------

    def _bind(self) -> asyncio.Queue[Ask]:
        """Remember the running loop (answers are handed to it); the queue of fresh asks."""
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._fresh is not None:
            return self._fresh
        if self._loop is not None and not self._loop.is_closed():
            raise RuntimeError(
                "this HumanChannel is in use by another event loop: create one channel per loop"
            )
        self._loop = loop
        self._fresh = asyncio.Queue()
        return self._fresh

    def _amend(self, text: str, label: str) -> bool:
        if self.amend_path is None or not text.strip():
            return False
        stamp = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M")
        heading = lang.text("human.amend_line", label=label, stamp=stamp)
        _append(self.amend_path, f"\n\n{heading}\n{_quote(text)}\n")
        return True

    def _claim(self, ask_id: str) -> bool:
        """Take ask_id off the waiting list; True for the one caller that got it."""
        with self._lock:
            return self._waiting.pop(ask_id, None) is not None

    def _resolve(self, ask_id: str, state: AskState, text: str) -> bool:
        with self._lock:
            entry = self._waiting.pop(ask_id, None)
        if entry is None:
            return False
        future = entry[1]
        try:
            # Future.set_result is not thread-safe: hand it to the future's own loop.
            future.get_loop().call_soon_threadsafe(_settle, future, (state, text))
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            return False
        return True

    def _close(self, ask: Ask, state: AskState, text: str) -> Ask:
        ask.state, ask.answer, ask.closed_at = state, text, time.time()
        self._log(ask)
        self._emit(ask.event(self.remaining))
        return ask

    def _mirror(self) -> None:
        if self.run_dir is not None:
            rows = [
                {"id": a.id, "question": a.question, "options": a.options, "asked_at": a.asked_at}
                for a in self.pending()
            ]
            write_asks(self.run_dir, rows)

    def _log(self, ask: Ask) -> None:
        if self.log_path is None:
            return
        stamp = datetime.fromtimestamp(ask.asked_at).astimezone().strftime("%Y-%m-%d %H:%M:%S")
        empty = lang.text("log.empty")
        lines = [f"## {ask.id} · {stamp} · {ask.state}", ""]
        lines.append(lang.text("log.question", text=ask.question or empty))
        if ask.options:
            lines.append(lang.text("log.options", text=" / ".join(ask.options)))
        if ask.state == "answered":
            lines.append(lang.text("log.answer", text=ask.answer or empty))
        else:
            outcome = lang.text(f"log.{ask.state}")
            lines.append(
                lang.text("log.outcome", text=outcome) + (f":{ask.answer}" if ask.answer else "")
            )
        lines.append(lang.text("log.waited", seconds=ask.waited_s))
        head = "" if self.log_path.exists() else lang.text("log.title")
        _append(self.log_path, f"{head}\n" + "\n".join(lines) + "\n")

    def _emit(self, event: Event) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # a broken UI must not end a run that has worked for hours
            logger.exception("on_event failed on %s", event.kind)

    def _emit_soon(self, event: Event) -> None:
        """Emit on the channel's loop: now if on it (or there is none), else scheduled."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop.is_closed() or running is loop:
            self._emit(event)
        else:
            loop.call_soon_threadsafe(self._emit, event)

    async def _ask_tool(self, args: dict[str, Any]) -> dict[str, Any]:
        ask = await self.ask(str(args.get("question") or ""), args.get("options"))
        return _text(self.reply(ask))

    async def _inbox_tool(self, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            unread, self._unread = self._unread, []
        if not unread:
            return _text(lang.text("human.empty_inbox"))
        for mail_id, text in unread:
            self._emit(_mail_event(mail_id, text, "read"))
        lines = [f"{n}. {text}" for n, (_, text) in enumerate(unread, 1)]
        return _text(lang.text("human.new_mail", count=len(unread)) + "\n".join(lines))


def _added() -> str:
    """The label of the human's own words appended to the brief."""
    return lang.text("human.added")


def _mail_event(mail_id: str, text: str, state: str) -> Event:
    return Event("ask", text, payload={"kind": "mail", "id": mail_id, "state": state})


def _settle(future: asyncio.Future[tuple[AskState, str]], value: tuple[AskState, str]) -> None:
    if not future.done():  # the ask may have been cancelled meanwhile
        future.set_result(value)


def _quote(text: str) -> str:
    """`text` quoted with `> `, so no line of it reads as a heading when the brief is parsed."""
    return "\n".join(f"> {line}".rstrip() for line in text.strip().split("\n"))


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
