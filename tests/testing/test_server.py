"""The HTTP surface of FakeAPI, spoken to directly (no CLI): formats, secrets, lifecycle."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from flower.core.pricing import PriceTable
from flower.testing import (
    Always,
    FakeAPI,
    Request,
    Usage,
    drop,
    fingerprint,
    http_error,
    text,
    tool,
)

REPO = Path(__file__).resolve().parents[2]


def post(
    api: FakeAPI, path: str, body: dict[str, Any], key: str = "sk-secret"
) -> tuple[int, bytes]:
    request = urllib.request.Request(
        api.url + path,
        data=json.dumps(body).encode(),
        headers={"x-api-key": key, "content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


BODY = {"model": "claude-opus-5-5", "messages": [{"role": "user", "content": "hi"}]}


def test_non_streaming_answer_is_a_message() -> None:
    with FakeAPI(Always(tool("Bash", {"command": "ls"}, say="look"))) as api:
        status, raw = post(api, "/v1/messages", {**BODY, "stream": False})
    message = json.loads(raw)
    assert status == 200 and message["type"] == "message"
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["input_tokens"] >= 1


def test_streaming_answer_has_event_and_data_lines() -> None:
    with FakeAPI(Always(text("hello"))) as api:
        status, raw = post(api, "/v1/messages?beta=true", {**BODY, "stream": True})
    frames = [f for f in raw.decode().split("\n\n") if f]
    events = [f.split("\n")[0].removeprefix("event: ") for f in frames]
    assert status == 200
    assert events == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(f.split("\n")[1].startswith("data: {") for f in frames)


def test_count_tokens() -> None:
    with FakeAPI() as api:
        status, raw = post(api, "/v1/messages/count_tokens?beta=true", BODY)
    assert status == 200 and json.loads(raw)["input_tokens"] > 0


def test_the_key_is_never_recorded_only_its_fingerprint(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    with FakeAPI(Always(text("x")), log_path=log) as api:
        post(api, "/v1/messages", {**BODY, "stream": False}, key="sk-very-secret")
    [recorded] = api.requests
    assert recorded.headers["x-api-key"] == "<redacted>"
    assert recorded.key_fingerprint == fingerprint("sk-very-secret")
    assert api.saw_key("sk-very-secret") and not api.saw_key("sk-other")
    assert "sk-very-secret" not in log.read_text()
    assert json.loads(log.read_text())["answered"] == "text"


def test_a_required_key_is_enforced() -> None:
    with FakeAPI(Always(text("x")), api_key="sk-right") as api:
        wrong, raw = post(api, "/v1/messages", BODY, key="sk-wrong")
        right, _ = post(api, "/v1/messages", BODY, key="sk-right")
    assert (wrong, right) == (401, 200)
    assert json.loads(raw)["error"]["type"] == "authentication_error"


def test_http_fault_carries_retry_after() -> None:
    from flower.testing import http_error

    with FakeAPI(Always(text("x", fault=http_error(429, retry_after=3)))) as api:
        request = urllib.request.Request(
            api.url + "/v1/messages", data=json.dumps(BODY).encode(), method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 429 and caught.value.headers["retry-after"] == "3"
    assert json.loads(caught.value.read())["error"]["type"] == "rate_limit_error"


def test_stop_then_start_on_the_same_port() -> None:
    api = FakeAPI(Always(text("x"))).start()
    port = api.port
    api.stop()
    with pytest.raises(urllib.error.URLError):
        post(api, "/v1/messages", BODY)
    api.start()
    try:
        assert api.port == port and post(api, "/v1/messages", BODY)[0] == 200
    finally:
        api.stop()


def start_process(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "flower.testing.fakeapi", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_process_mode_rejects_a_malformed_script_by_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - reply: ok\n  - repl: typo\n")
    proc = start_process("--script", str(bad))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "bad.yaml:3: rule #2: unknown key 'repl'" in err


def test_process_mode_requires_the_key_from_the_environment(tmp_path: Path) -> None:
    script = REPO / "examples" / "fakeapi" / "write-file.yaml"
    env = {**os.environ, "FAKE_KEY": "sk-from-env"}
    with start_process("--script", str(script), "--require-key-env", "FAKE_KEY", env=env) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split()[-1]
            api = FakeAPI(port=int(url.rsplit(":", 1)[1]))
            assert post(api, "/v1/messages", BODY, key="sk-wrong")[0] == 401
            assert post(api, "/v1/messages", BODY, key="sk-from-env")[0] == 200
        finally:
            proc.terminate()


def test_each_answer_records_the_usage_that_reached_the_client_and_its_price() -> None:
    """What the gateway's meter would read off the same bytes: message_start's usage, then
    message_delta's output count; a stream cut before message_delta keeps message_start's."""
    whole = Usage(input_tokens=1000, output_tokens=300, cache_read_input_tokens=50)
    replies = iter(
        [
            text("streamed", usage=whole),
            text("not streamed", usage=whole),
            text("cut", usage=whole, fault=drop(after_blocks=1)),
            text("refused", fault=http_error(529)),
        ]
    )
    with FakeAPI(lambda request: next(replies)) as api:
        post(api, "/v1/messages", {**BODY, "stream": True})
        post(api, "/v1/messages", {**BODY, "stream": False})
        with contextlib.suppress(OSError, http.client.HTTPException):
            post(api, "/v1/messages", {**BODY, "stream": True})
        post(api, "/v1/messages", {**BODY, "stream": True})
    streamed, plain, cut, refused = api.requests
    final = {**asdict(whole), "output_tokens": 300}
    assert streamed.usage == plain.usage == final
    assert cut.usage == {**final, "output_tokens": 1}  # message_start's count only
    assert refused.usage is None and streamed.answer_model == "claude-opus-5-5"
    price = PriceTable().lookup("claude-opus-5-5")[0]
    assert api.cost() == pytest.approx(2 * price.cost(final) + price.cost(cut.usage))


def test_hold_keeps_every_answer_until_it_returns_and_holds_no_other_request() -> None:
    """Two requests held at once (the hook runs outside the script's lock), neither answered
    before the hold is lifted, and count_tokens is never held."""
    lifted = threading.Event()
    held: list[int] = []

    def hold(request: Request) -> None:
        held.append(request.index)
        lifted.wait(timeout=10)

    with FakeAPI(Always(text("x")), hold=hold) as api, ThreadPoolExecutor(2) as pool:
        answers = [pool.submit(post, api, "/v1/messages", BODY) for _ in range(2)]
        assert api.wait_for(lambda _: len(held) == 2, timeout=10)
        assert post(api, "/v1/messages/count_tokens", BODY)[0] == 200
        assert not any(answer.done() for answer in answers)
        lifted.set()
        assert [answer.result()[0] for answer in answers] == [200, 200]
    assert len(held) == 2
