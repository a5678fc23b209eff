"""No way out through the API (issue 37, A1): a real gateway process refuses every body that
would make the Messages API fetch or call out with the real key, the upstream never sees
one, and `--allow-api-fetch` or (for a URL source) the egress allowlist lets them through."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.testing import Always, FakeAPI, text
from flowerbox.sidecar.reach import FetchRule, Found, Reach, inspect, request_object
from tests.flowerbox.conftest import GatewayProcess, UnixHTTPConnection

Start = Callable[..., GatewayProcess]
MESSAGES = "/v1/messages?beta=true"
COUNT = "/v1/messages/count_tokens?beta=true"
ALLOWED_HOST = "docs.example.test"


def asking(*content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [*content, {"type": "text", "text": "go"}]}],
        **extra,
    }


def url_source(kind: str, url: str) -> dict[str, Any]:
    return {"type": kind, "source": {"type": "url", "url": url}}


# Each body shape that makes the API reach beyond the request, and what the refusal names.
REACHING = {
    "image url": (asking(url_source("image", "https://evil.test/a.png")), "evil.test/a.png"),
    "document url": (
        asking(url_source("document", "https://evil.test/big.pdf")),
        "document source from 'https://evil.test/big.pdf'",
    ),
    "url in a tool result": (
        asking(
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [url_source("image", "https://evil.test/x.png")],
            }
        ),
        "image source from 'https://evil.test/x.png'",
    ),
    "file source": (
        asking({"type": "document", "source": {"type": "file", "file_id": "file_011"}}),
        "document source of a file_id",
    ),
    "container upload": (
        asking({"type": "container_upload", "file_id": "file_011"}),
        "container_upload of a file_id",
    ),
    "mcp servers": (
        asking(mcp_servers=[{"type": "url", "url": "https://mcp.evil.test/sse", "name": "x"}]),
        "mcp_servers (https://mcp.evil.test/sse)",
    ),
    "web search": (
        asking(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
        "the server tool web_search_20250305",
    ),
    "web fetch": (
        asking(tools=[{"type": "web_fetch_20250910", "name": "web_fetch"}]),
        "the server tool web_fetch_20250910",
    ),
    "code execution": (
        asking(tools=[{"type": "code_execution_20250825", "name": "code_execution"}]),
        "the server tool code_execution_20250825",
    ),
    "an unknown typed tool": (
        asking(tools=[{"type": "future_tool_20270101", "name": "f"}]),
        "the server tool future_tool_20270101",
    ),
    "container": (asking(container="container_011"), "a container"),
    "a source whose type is an object": (
        asking({"type": "image", "source": {"type": {"url": "https://evil.test/o.png"}}}),
        "image source of a kind it does not know",
    ),
    "a system block": (
        {**asking(), "system": [url_source("document", "https://evil.test/s.pdf")]},
        "evil.test/s.pdf",
    ),
}


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI(Always(text("ok")), api_key="sk-real-test-key") as fake:
        yield fake


def post(gateway: GatewayProcess, body: bytes, path: str = MESSAGES) -> tuple[int, str]:
    conn = UnixHTTPConnection(gateway.socket)
    try:
        headers = {"x-api-key": "sk-placeholder", "content-type": "application/json"}
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        data = json.loads(response.read())
    finally:
        conn.close()
    message = data.get("error", {}).get("message", "") if response.status != 200 else ""
    return response.status, message


@pytest.mark.parametrize("name", sorted(REACHING))
def test_each_way_out_is_refused_and_never_reaches_the_upstream(
    name: str, api: FakeAPI, start_gateway: Start
) -> None:
    body, named = REACHING[name]
    gateway = start_gateway(api.url)
    for path in (MESSAGES, COUNT):
        status, message = post(gateway, json.dumps(body).encode(), path)
        assert status == 403, (path, message)
        assert named in message and "--allow-api-fetch" in message
    assert api.requests == []
    assert "refused: API fetch" in gateway.settled(2).log()


def test_client_side_tools_and_plain_bodies_pass(api: FakeAPI, start_gateway: Start) -> None:
    gateway = start_gateway(api.url)
    client_tools = [
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        {"type": "custom", "name": "mine", "input_schema": {"type": "object"}},
        {"name": "Read", "input_schema": {"type": "object"}},
        # the bundled CLI's Grep has a parameter named "type": a schema, not a block's type
        {
            "name": "Grep",
            "input_schema": {"type": "object", "properties": {"type": {"type": "string"}}},
        },
    ]
    base64_image = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    for body in (asking(), asking(base64_image, tools=client_tools)):
        assert post(gateway, json.dumps(body).encode())[0] == 200
    assert len(api.requests) == 2


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"model": "m", "mcp_servers": [{"url": "https://x"}], "mcp_servers": []}', "twice"),
        (b"not json", "not one JSON object"),
        (b'["a list"]', "not a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
        (b'{"model": "\xff"}', "not UTF-8"),
    ],
)
def test_a_body_it_cannot_read_as_the_api_would_is_refused(
    body: bytes, why: str, api: FakeAPI, start_gateway: Start
) -> None:
    gateway = start_gateway(api.url)
    status, message = post(gateway, body)
    assert status == 400 and why in message
    assert api.requests == []


def test_allow_api_fetch_forwards_them_all(api: FakeAPI, start_gateway: Start) -> None:
    gateway = start_gateway(api.url, args=("--allow-api-fetch",))
    for body, _ in REACHING.values():
        assert post(gateway, json.dumps(body).encode())[0] == 200
    assert len(api.requests) == len(REACHING)


def test_a_url_source_on_an_allowed_host_passes_and_nothing_else_does(
    api: FakeAPI, start_gateway: Start, sockdir: Path, tmp_path: Path
) -> None:
    egress = ("--proxy-socket", str(sockdir / "proxy.sock"), "--egress-log", str(tmp_path / "e"))
    gateway = start_gateway(api.url, args=(*egress, "--allow", ALLOWED_HOST))
    allowed = asking(url_source("image", f"https://{ALLOWED_HOST}/a.png"))
    assert post(gateway, json.dumps(allowed).encode())[0] == 200
    refused = [
        f"https://{ALLOWED_HOST}@evil.test/a.png",  # userinfo: the host is evil.test
        f"https://evil.test\\@{ALLOWED_HOST}/a.png",  # a backslash parsers disagree on
        f"https://{ALLOWED_HOST}.evil.test/a.png",
        f"https://evil.test/?u=https://{ALLOWED_HOST}/",
        f"https://{ALLOWED_HOST}%2eevil.test/",
        f"ftp://{ALLOWED_HOST}/a.png",
    ]
    for url in refused:
        status, message = post(gateway, json.dumps(asking(url_source("image", url))).encode())
        assert status == 403 and "--allow HOST" in message, url
    # The allowlist governs URL sources only: a server tool still needs the flag.
    search = asking(tools=[{"type": "web_search_20250305", "name": "web_search"}])
    assert post(gateway, json.dumps(search).encode())[0] == 403
    assert len(api.requests) == 1


@pytest.mark.english
def test_the_rule_without_a_gateway() -> None:
    found = inspect(request_object(json.dumps(REACHING["document url"][0]).encode()))
    assert found == Found((Reach(REACHING["document url"][1], "evil.test", is_url=True),))
    assert found.input_bound(200) is None
    assert FetchRule(allow_api_fetch=True).refusal(found) is None
    plain = inspect(asking())
    assert plain.input_bound(200) == 200 and FetchRule().refusal(plain) is None
    tools = inspect(asking({"type": "image", "source": {"type": "base64"}}, tools=[{"name": "x"}]))
    assert tools.input_bound(200) == 200 + 512 + 5_000
