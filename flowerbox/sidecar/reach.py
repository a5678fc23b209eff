"""What a Messages request makes the API itself reach, and how much input it can bill.

    request = request_object(body)            # one JSON object, or RequestRefused
    found = inspect(request)
    FetchRule(allow_api_fetch=False, policy=policy).refusal(found)   # a message, or None
    found.input_bound(len(body))              # tokens the body can bill, None: unbounded

The Messages API fetches and calls out on a request's behalf (docs/gateway.md, "No way out
through the API"): a content block whose `source` is `{"type": "url"}` (an image or document
the API downloads), `{"type": "file"}` or a `file_id` (a file of the account, not of the
request), `mcp_servers` (servers the API calls), `container` (a code-execution container,
with its files and skills), and server tools: a `tools` entry with a `type` the API runs
itself (`web_search_*`, `web_fetch_*`, `code_execution_*`, ...). Each is a way out for
workspace data that `--network none` does not close, and each bills input the body does not
hold. Anything typed that is not a known client-side tool counts as a server tool: a new
server tool is refused until it is known, never forwarded unseen. Likewise an image or
document whose source is not one the request holds (base64, text, content blocks), a
`tools` that is not a list of objects, and a `server_tool_use`/`mcp_tool_use` block (a call
the API would make in a turn it continues).

The body is read as the API would read it, or not at all: a body that is not one JSON
object, or has an object with the same key twice (a parser that keeps the first would see
another request than one that keeps the last), or is nested past the parser's recursion
limit, or has NaN/Infinity or a lone surrogate escape (parsers read them differently: one
that drops `\\ud800` reads `"ur\\ud800l"` as `"url"`), is refused.

Errors: `RequestRefused` (the body cannot be inspected; `status` and `kind` for the answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flower import text
from flowerbox.errors import BadRequest
from flowerbox.sidecar.egress import Policy, parse_host

__all__ = [
    "CLIENT_TOOL_TYPES",
    "CONTEXT_WINDOW",
    "FetchRule",
    "Found",
    "IMAGE_TOKENS",
    "TOOLS_TOKENS",
    "Reach",
    "RequestRefused",
    "inspect",
    "request_object",
]

# The largest context window of any model the price table knows (the 1M-token tier): what
# a request can bill as input when its body does not bound it.
CONTEXT_WINDOW = 1_000_000
# A request with server tools is sampled again after each server tool call, and each
# sampling bills the whole context again; the API pauses such a turn (`pause_turn`) after
# this many iterations.
SERVER_TOOL_ITERATIONS = 10
# What the body's bytes do not cover: the system prompt the API adds to a request with
# tools (346 tokens at most; a message's own framing costs fewer tokens than its JSON has
# bytes), and an image (billed by its pixels after resizing, up to ~1,600 tokens; 4,784 on
# high-resolution models) whose base64 can be shorter than that.
TOOLS_TOKENS = 512
IMAGE_TOKENS = 5_000
# Tool types the client runs (the API only describes them to the model): not a way out.
CLIENT_TOOL_TYPES = re.compile(r"(custom|bash|computer|text_editor|memory)(_\d{8})?")
# A URL the API would fetch, in a form no two URL parsers read differently: http(s), a bare
# host name (no userinfo, no backslash, no percent-encoding in the host), an optional port.
_STRICT_URL = re.compile(r"https?://([A-Za-z0-9.-]+)(?::\d{1,5})?(?:[/?#][!-\[\]-~]*)?")
_SHOWN = 120
# The blocks the API reads a `source` of, and the source types whose content is in the
# request: any other (a new type, a spelling like "URL") is refused until it is known.
_SOURCED = frozenset({"image", "document"})
_HELD_SOURCES = frozenset({"base64", "text", "content"})
# Blocks that are a server's call (in a turn the API continues): made only by server tools.
_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
# A surrogate left in a decoded string is a lone one (a pair decodes to one code point):
# invalid Unicode that parsers drop, replace or refuse, so "ur\ud800l" may read as "url".
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class RequestRefused(BadRequest):
    """A body the gateway will not forward because it cannot tell what it makes the API do."""


@dataclass(frozen=True)
class Reach:
    """One thing in a request that makes the API reach beyond the request: what it is (as a
    refusal names it) and, for a URL source, its host when the URL is strict."""

    what: str
    host: str | None = None
    is_url: bool = False


@dataclass(frozen=True)
class Found:
    """What `inspect` found in a request."""

    reaches: tuple[Reach, ...] = ()
    server_tools: bool = False  # a server tool: the API samples again after each call
    pdfs: int = 0  # base64 PDFs: compressed text can bill far more tokens than its bytes
    images: int = 0
    tools: bool = False
    samplings: int = 1  # 2 with server-side compaction: the context is read to summarise it

    def input_bound(self, body_bytes: int) -> int | None:
        """The most input tokens the request can bill, or None when nothing in the body
        bounds it (something fetched, a file reference, a PDF): a token is at least one
        byte of text, plus the tools' system prompt and each image's allowance."""
        if self.reaches or self.pdfs:
            return None
        once = body_bytes + self.tools * TOOLS_TOKENS + self.images * IMAGE_TOKENS
        return once * self.samplings

    def unbounded_input(self) -> int:
        """What the request is reserved for when `input_bound` is None: the context window,
        once per server-tool iteration and per sampling (a compaction reads it too)."""
        iterations = SERVER_TOOL_ITERATIONS if self.server_tools else 1
        return CONTEXT_WINDOW * iterations * self.samplings


@dataclass(frozen=True)
class FetchRule:
    """What one run lets the API reach for it: everything with `--allow-api-fetch`; else
    only URL sources whose host the egress allowlist (`policy`; None under `--net open`)
    lets through, since the agent can reach those through its proxy anyway."""

    allow_api_fetch: bool = False
    policy: Policy | None = None

    def refusal(self, found: Found) -> str | None:
        """The refusal's message for what the rule does not allow, or None."""
        if self.allow_api_fetch:
            return None
        refused = [reach.what for reach in found.reaches if not self._allowed(reach)]
        if not refused:
            return None
        more = text("reach.more", count=len(refused) - 5) if refused[5:] else ""
        shown = "; ".join(refused[:5]) + more
        return "flowerbox gateway: " + text("reach.refused", shown=shown)

    def _allowed(self, reach: Reach) -> bool:
        if not reach.is_url or reach.host is None or self.policy is None:
            return False
        try:
            host = parse_host(reach.host)
        except ValueError:
            return False
        return self.policy.check_target(host).allowed


def request_object(body: bytes) -> dict[str, Any]:
    """The body as one JSON object, read strictly.

    Raises:
        RequestRefused: not UTF-8 JSON, not an object, a key twice in one object, or nested
            deeper than the parser recurses.
    """
    try:
        data = json.loads(
            body.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant
        )
    except UnicodeDecodeError:
        raise _unreadable(text("gateway.body_not_utf8")) from None
    except RecursionError:  # the parser recurses once per level, and stops itself
        raise _unreadable(text("gateway.body_too_deep")) from None
    except ValueError as exc:
        raise _unreadable(str(exc)) from None
    if not isinstance(data, dict):
        raise _unreadable(text("gateway.body_not_object"))
    if any(_LONE_SURROGATE.search(string) for string in _strings(data)):
        raise _unreadable(text("gateway.body_surrogate"))
    return data


def inspect(request: dict[str, Any]) -> Found:
    """Every way out in a request (any depth: messages, system, tool results), its server
    tools, and the PDFs and images whose billed size the bytes may not bound."""
    reaches: list[Reach] = []
    pdfs = images = 0
    if request.get("mcp_servers"):
        reaches.append(Reach(text("reach.mcp_servers", servers=_servers(request["mcp_servers"]))))
    if request.get("container") is not None:
        reaches.append(Reach(text("reach.container")))
    server_tools = False
    tools = request.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        reaches.append(Reach(text("reach.tools_not_list")))
        tools = []
    for tool in tools:
        kind = tool.get("type")
        if isinstance(kind, str) and not CLIENT_TOOL_TYPES.fullmatch(kind):
            reaches.append(Reach(text("reach.server_tool", tool=_shown(kind))))
            server_tools = True
    reported: set[int] = set()  # the sources named already: their file_id is not news
    for block in _objects(request):
        block_type = _kind(block)
        source = block.get("source")
        reach = _source(block, source) if isinstance(source, dict) else None
        if reach is None and block_type in _SOURCED and "source" in block:
            known = isinstance(source, dict) and _kind(source) in _HELD_SOURCES
            reach = None if known else Reach(text("reach.unknown_source", block=block_type))
        if reach is not None:
            reaches.append(reach)
            reported.add(id(source))
        elif isinstance(source, dict):
            if source.get("type") == "base64" and source.get("media_type") == "application/pdf":
                pdfs += 1
            elif block_type == "image":
                images += 1
        if "file_id" in block and id(block) not in reported:
            shown = _shown(str(block_type or text("reach.a_block")))
            reaches.append(Reach(text("reach.file_id", block=shown)))
        if block_type in _SERVER_CALLS:
            reaches.append(Reach(text("reach.server_call", block=block_type)))
    samplings = 2 if _compacts(request.get("context_management")) else 1
    return Found(tuple(reaches), server_tools, pdfs, images, bool(request.get("tools")), samplings)


def _kind(obj: dict[str, Any]) -> str | None:
    """An object's `type` where it is a string: elsewhere (a tool schema's property named
    "type", say Grep's) it is data, and a set of block types is never asked about it."""
    kind = obj.get("type")
    return kind if isinstance(kind, str) else None


def _compacts(management: Any) -> bool:
    """Whether a request asks the API to compact its context itself (a `compact_*` edit)."""
    edits = management.get("edits") if isinstance(management, dict) else None
    return isinstance(edits, list) and any(
        isinstance(edit, dict) and str(edit.get("type", "")).startswith("compact") for edit in edits
    )


def _source(block: dict[str, Any], source: dict[str, Any]) -> Reach | None:
    """A block's source that is not in the request: a URL the API fetches, or a file."""
    kind, block_type = source.get("type"), _shown(str(block.get("type") or text("reach.a_blocks")))
    if kind == "url":
        url = source.get("url")
        url = url if isinstance(url, str) else ""
        strict = _STRICT_URL.fullmatch(url)
        host = strict.group(1) if strict else None
        said = text("reach.source_from", block=block_type, url=repr(_shown(url)))
        return Reach(said, host, is_url=True)
    if kind == "file" or "file_id" in source:
        return Reach(text("reach.source_file", block=block_type))
    return None


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object inside `value` the API reads as content, without recursion: not
    the input of a `tool_use` block, which is the model's arguments to a client tool (a
    URL source there is text, and refusing it would end a run whose model wrote one)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            skipped = "input" if item.get("type") == "tool_use" else None
            stack.extend(value for key, value in item.items() if key != skipped)
        elif isinstance(item, list):
            stack.extend(item)


def _servers(servers: Any) -> str:
    listed = servers if isinstance(servers, list) else [servers]
    urls = [str(s.get("url")) for s in listed if isinstance(s, dict) and "url" in s]
    return ", ".join(_shown(url) for url in urls[:3]) or text("reach.servers", count=len(listed))


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _strings(value: Any) -> Iterator[str]:
    """Every key and string value inside `value`, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            yield from item.keys()
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"the key {_shown(key)!r} appears twice in one object")
        data[key] = value
    return data


def _unreadable(why: str) -> RequestRefused:
    return RequestRefused(
        "flowerbox gateway: " + text("gateway.body_unreadable", why=why), status=400
    )
