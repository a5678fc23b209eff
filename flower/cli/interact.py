"""The terminal around a run: the stdin thread, Ctrl+C as an interrupt, `?` for the oracle,
SIGTERM/SIGHUP as a clean stop. Terminal-specific wiring, not part of the framework.

The stdin thread follows seed 004 to the letter: a daemon thread (a blocked input() cannot be
cancelled, and asyncio.run joins its executor's threads at exit), select() polling (so the
stop flag is seen), and always reading (a line typed while nobody asks goes to the inbox,
instead of waiting in the terminal buffer to answer the next question unseen).
"""

from __future__ import annotations

import asyncio
import select
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from flower.core.events import Event
from flower.core.human import HumanChannel
from flower.core.lang import text
from flower.core.roles import oracle
from flower.core.rundir import RunDir
from flower.core.runtime import Runtime

ORACLE_WINDOW = 60  # the last events the oracle is shown


class Terminal:
    """Connects a running workflow to this terminal."""

    def __init__(
        self,
        runtime: Runtime,
        channel: HumanChannel | None,
        *,
        say: Callable[[str], None],
        interactive: bool,
    ) -> None:
        self.runtime = runtime
        self.channel = channel
        self.say = say
        self.interactive = interactive
        self.recent: deque[str] = deque(maxlen=ORACLE_WINDOW)
        self.stopped_by: str | None = None
        self._interrupting = False
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[Any] | None = None
        self._aside: Runtime | None = None
        self._side_tasks: set[asyncio.Task[None]] = set()

    def observe(self, event: Event) -> None:
        """Keep the recent events for the oracle (plain text, never the SDK objects)."""
        if event.kind in ("text", "tool_call", "step", "handoff", "retry", "error", "ask"):
            self.recent.append(f"[{event.kind}] {event}"[:300])

    async def run(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Run `work` with the terminal attached; re-raises CancelledError when stopped."""
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.ensure_future(work)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._loop.add_signal_handler(sig, self._stop_run, sig.name)
        self._loop.add_signal_handler(signal.SIGINT, self._on_ctrl_c)
        if self.interactive:
            threading.Thread(target=self._read_stdin, daemon=True, name="stdin").start()
        try:
            done = await self._main
            await self._side_questions_answered()
            return done
        finally:
            self._stop.set()
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                self._loop.remove_signal_handler(sig)
            for task in list(self._side_tasks):
                task.cancel()
            if self._aside is not None:
                self._aside.close()

    # --- signals ---------------------------------------------------------------------------

    def _stop_run(self, why: str) -> None:
        """Stop at once: the step in flight is recorded, lineage already points at its
        session, so the next `flower "ask"` in this folder resumes it. Side questions still
        being answered are dropped."""
        self.stopped_by = self.stopped_by or why
        for task in (self._main, *self._side_tasks):
            if task is not None:
                task.cancel()

    def _on_ctrl_c(self) -> None:
        finished = self._main is not None and self._main.done()  # only side questions left
        if not self.interactive or self._interrupting or finished:
            self._stop_run("SIGINT")
            return
        self._interrupting = True
        self.say(text("terminal.interrupt"))

    # --- stdin -----------------------------------------------------------------------------

    def _read_stdin(self) -> None:
        while not self._stop.is_set():
            if not select.select([sys.stdin], [], [], 0.2)[0]:
                continue
            line = sys.stdin.readline()
            if not line:  # EOF
                return
            self._dispatch(line.strip())

    def _dispatch(self, line: str) -> None:
        """One typed line: an interrupt's words, an oracle question, an answer, or mail."""
        if self._interrupting:
            self._interrupting = False
            self.runtime.interrupt(line)
            self.say(text("terminal.interrupted"))
            return
        if not line:
            return
        if line.startswith("?"):
            self._soon(self._ask_oracle(line[1:].strip()))
            return
        if self.channel is None:
            return
        pending = self.channel.pending()
        if pending:
            self.channel.answer(pending[0].id, line)  # thread-safe
        else:
            self.channel.send(line)  # to the inbox, not interrupting anything

    def _soon(self, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None

        def start() -> None:
            task = asyncio.ensure_future(coroutine)
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)

        self._loop.call_soon_threadsafe(start)

    # --- the oracle ------------------------------------------------------------------------

    async def _side_questions_answered(self) -> None:
        """Seed 004's reference terminal: the run is over, but a `?` question still being
        answered is waited for (its answer was asked and paid for); a stop skips the wait."""
        if self._side_tasks:
            self.say(text("terminal.oracle_wait"))
            await asyncio.wait(set(self._side_tasks))

    async def _ask_oracle(self, question: str) -> None:
        """A read-only side session under <run_dir>/aside: its cost and sessions never enter
        the main manifest, and nothing it says enters the run's context."""
        if not question:
            return
        if self._aside is None:
            self._aside = Runtime(
                workspace=self.runtime.workspace,
                run_dir=RunDir(self.runtime.run_dir).aside.path,
                workbench=self.runtime.workbench or False,
            )
        events = "\n".join(self.recent) or text("terminal.no_events")
        prompt = text("terminal.oracle_prompt", question=question, events=events)
        try:
            result = await self._aside.run(oracle(), prompt)
        except Exception as exc:  # a failed side question must not end the run
            self.say(text("terminal.oracle_failed", error=f"{type(exc).__name__}: {exc}"))
            return
        self.say(text("terminal.oracle_said", answer=result.text or result.error))
