"""Scripts: what the fake model answers to each request.

A script is any callable `(Request) -> Reply`. Three building blocks cover most tests:

    Sequence([...])   replies in order within one conversation; the position is derived from
                      the conversation itself (which scripted replies it already contains), so
                      retries, resumes and concurrent subagents all land on the right reply
    Always(reply)     the same answer every time (fresh tool ids each time)
    Rules([...])      routes each request to the first Rule whose When matches: main thread or
                      a subagent, text in the system prompt or the conversation, tool results

Errors tree:
    ScriptError            a script could not decide (no rule matched, sequence exhausted,
                           a callable raised); the server answers it with a visible 400
    └── ScriptFileError    a declarative script file is malformed (names the line or rule)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from flower.core.lang import text
from flower.errors import FlowerError
from flower.testing.replies import Reply, Text, ToolUse, new_tool_id
from flower.testing.request import Request, RequestKind

Script = Callable[[Request], Reply]

DEFAULT_SUMMARY = Reply(
    blocks=(Text("<summary>The conversation so far, summarised by the fake model.</summary>"),)
)


class ScriptError(FlowerError):
    """A script could not produce a reply for a request."""


class ScriptFileError(ScriptError):
    """A declarative script file is malformed; the message names the file and line or rule."""


class _FaultBudget:
    """Counts how often each reply's fault was injected, so `times=N` faults run out."""

    def __init__(self) -> None:
        self._served: dict[object, int] = {}
        self._lock = threading.Lock()

    def apply(self, key: object, reply: Reply) -> Reply:
        fault = reply.fault
        if fault is None or fault.times is None:
            return reply
        with self._lock:
            served = self._served.get(key, 0)
            if served >= fault.times:
                return replace(reply, fault=None)
            self._served[key] = served + 1
            return reply


class Sequence:
    """Replies in order, one per model turn of a conversation.

    The next reply is the one after the latest scripted reply already present in the
    conversation: a reply with tool calls is recognised by its tool ids, a text-only reply by
    its exact text. So a re-sent request (after a fault) gets the same reply again, and a
    resumed session continues where it was. Keep text-only replies of one sequence distinct.
    When the sequence is exhausted, `then` answers, or the request fails with a ScriptError.
    """

    def __init__(self, replies: Iterable[Reply], *, then: Reply | None = None) -> None:
        self.replies = list(replies)
        self.then = then
        self._faults = _FaultBudget()

    def position(self, request: Request) -> int:
        """How many replies of this sequence the conversation already contains."""
        tool_ids = {str(b.get("id")) for b in request.tool_uses()}
        texts = set(request.assistant_texts)
        for k in range(len(self.replies) - 1, -1, -1):
            reply = self.replies[k]
            if reply.tool_ids:
                if any(i in tool_ids for i in reply.tool_ids):
                    return k + 1
            elif reply.text and reply.text in texts:
                return k + 1
        return 0

    def __call__(self, request: Request) -> Reply:
        k = self.position(request)
        if k < len(self.replies):
            return self._faults.apply(k, self.replies[k])
        if self.then is not None:
            return _fresh_ids(self.then)
        raise ScriptError(text("script.exhausted", count=len(self.replies)))


class Always:
    """The same reply to every request it gets (tool ids made fresh each time)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self._faults = _FaultBudget()

    def __call__(self, request: Request) -> Reply:
        return _fresh_ids(self._faults.apply(self, self.reply))


def _fresh_ids(reply: Reply) -> Reply:
    blocks = tuple(
        replace(b, id=new_tool_id()) if isinstance(b, ToolUse) else b for b in reply.blocks
    )
    return replace(reply, blocks=blocks)


@dataclass(frozen=True)
class When:
    """Conditions on a request; all given ones must hold.

    kind: "main", "subagent", "compaction" or "count_tokens". When None, any kind except
        compaction matches (compaction requests fall through to a built-in summary unless a
        rule asks for them explicitly).
    system_contains: text in the system prompt (a subagent's AgentDefinition.prompt is there).
    contains: text anywhere in the system prompt or the messages.
    last_user_contains: text in the latest user message (tool results included).
    tool_results / min_tool_results: the number of tool_result blocks so far.
    """

    kind: RequestKind | None = None
    system_contains: str | None = None
    contains: str | None = None
    last_user_contains: str | None = None
    tool_results: int | None = None
    min_tool_results: int | None = None

    def matches(self, request: Request) -> bool:
        if self.kind is None:
            if request.kind == "compaction":
                return False
        elif request.kind != self.kind:
            return False
        if self.system_contains is not None and self.system_contains not in request.system_text:
            return False
        if self.contains is not None and not request.contains(self.contains):
            return False
        if self.last_user_contains is not None and (
            self.last_user_contains not in request.last_user_text
        ):
            return False
        count = len(request.tool_results())
        if self.tool_results is not None and count != self.tool_results:
            return False
        return self.min_tool_results is None or count >= self.min_tool_results


@dataclass(frozen=True)
class Rule:
    """A When and the script that answers the requests it matches."""

    when: When
    answer: Script
    name: str = ""


class Rules:
    """Answers each request with the first matching rule.

    `placeholders=True` (declarative files) replaces `{cwd}` in tool inputs with the working
    directory the CLI reports in its environment message, so a file can name paths.
    """

    def __init__(self, rules: Iterable[Rule], *, placeholders: bool = False) -> None:
        self.rules = list(rules)
        self.placeholders = placeholders

    def __call__(self, request: Request) -> Reply:
        for number, rule in enumerate(self.rules, 1):
            if rule.when.matches(request):
                try:
                    reply = rule.answer(request)
                except ScriptError as exc:
                    said = text("script.rule_failed", rule=_label(number, rule.name), problem=exc)
                    raise ScriptError(said) from exc
                return _expand(reply, request) if self.placeholders else reply
        if request.kind == "compaction":
            return DEFAULT_SUMMARY
        raise ScriptError(
            text(
                "script.no_match",
                index=request.index,
                kind=request.kind,
                agent_id=request.agent_id,
                results=len(request.tool_results()),
            )
        )


def _label(number: int, name: str) -> str:
    return f"#{number} '{name}'" if name else f"#{number}"


_CWD = re.compile(r"Primary working directory: (.+?)\s*$", re.MULTILINE)  # paths have spaces


def working_directory(request: Request) -> str:
    """The cwd the CLI reports to the model (a worktree subagent reports its worktree)."""
    match = _CWD.search(request.system_text)
    return match.group(1) if match else ""


def _expand(reply: Reply, request: Request) -> Reply:
    cwd = working_directory(request)

    def sub(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{cwd}", cwd)
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [sub(v) for v in value]
        return value

    blocks = tuple(
        replace(b, input=sub(b.input)) if isinstance(b, ToolUse) else b for b in reply.blocks
    )
    return replace(reply, blocks=blocks)


def sequence(*replies: Reply, then: Reply | None = None) -> Sequence:
    """Shorthand: `sequence(tool(...), text("done"))`."""
    return Sequence(replies, then=then)


def rules(*pairs: tuple[When, Script] | Rule) -> Rules:
    """Shorthand: `rules((When(kind="subagent"), worker), (When(), main))`."""
    return Rules(p if isinstance(p, Rule) else Rule(p[0], p[1]) for p in pairs)
