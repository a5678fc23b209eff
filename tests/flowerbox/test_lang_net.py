"""Issue 36 item 5 for the processes beside the box: the gateway answers and logs a refusal in
its run's language (the box's FLOWER_LANG, passed to its container), the broker in its
operator's (its own --lang, $FLOWER_LANG or locale: one broker serves a team), and the git
relay's push refusals follow the same table; English where English is asked for."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from flowerbox.broker import client
from flowerbox.broker.pktline import PushError, read_push
from flowerbox.errors import BrokerError
from tests.flowerbox.conftest import REAL_KEY, kill_left_running, wait_for
from tests.flowerbox.test_broker import BrokerProcess

BARE_LF = b"GET /v1/models HTTP/1.1\nHost: x\n\n"
SAID = {
    "zh": "请求头中有单独的 CR 或 LF；每行应以 CRLF 结尾",
    "en": "a bare CR or LF in the request head; lines end with CRLF",
}
A_LIST = (
    b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
    b'x-api-key: sk-placeholder\r\ncontent-length: 10\r\n\r\n["a list"]'
)
UNREAD = {
    "zh": "请求体不是网关能读的单个 JSON 对象（它不是 JSON 对象）；网关必须读懂请求体",
    "en": "the request body is not one JSON object it can read (it is not a JSON object); it",
}


def gateway(
    tmp: Path,
    sock: Path,
    lang: str,
    key: str = REAL_KEY,
    *,
    upstream: str = "",
    args: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """`python -m flowerbox.sidecar.gateway` as its container runs it, in `lang` (with
    `upstream` its ANTHROPIC_BASE_URL, `args` more of its command line)."""
    creds = tmp / f"creds-{lang}.env"
    creds.write_text(f"ANTHROPIC_API_KEY={key}\n" if key else "ANTHROPIC_BASE_URL=http://x\n")
    if upstream:
        creds.write_text(creds.read_text() + f"ANTHROPIC_BASE_URL={upstream}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FLOWER_"))}
    with (tmp / f"gateway-{lang}.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "flowerbox.sidecar.gateway", "--socket", str(sock)]
            + ["--credentials", str(creds), "--usage", str(tmp / f"usage-{lang}.json")]
            + ["--requests", str(tmp / f"requests-{lang}.jsonl"), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env | {"FLOWER_LANG": lang},
        )


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    try:
        yield processes
    finally:
        kill_left_running(processes)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_gateway_answers_and_logs_a_malformed_request_in_its_runs_language(
    lang: str, sockdir: Path, tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    sock = sockdir / f"api-{lang}.sock"
    process = gateway(tmp_path, sock, lang)
    started.append(process)
    wait_for(lambda: sock.exists() or process.poll() is not None)
    other = "en" if lang == "zh" else "zh"
    for raw, said in ((BARE_LF, SAID), (A_LIST, UNREAD)):
        error = answered(sock, raw)
        assert error["type"] == "invalid_request_error" and said[lang] in error["message"]
        assert said[other] not in error["message"]
    requests = tmp_path / f"requests-{lang}.jsonl"
    wait_for(lambda: len(requests.read_text().splitlines()) == 2)
    rows = [json.loads(line) for line in requests.read_text().splitlines()]
    assert [row["status"] for row in rows] == [400, 400]
    assert SAID[lang] in rows[0]["note"]


def answered(sock: Path, raw: bytes) -> dict[str, str]:
    """The `error` of the gateway's 400 answer to `raw`, sent on a connection of its own."""
    answer = exchange(sock, raw)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer
    error: dict[str, str] = json.loads(body)["error"]
    return error


@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("zh", "既没有 ANTHROPIC_API_KEY 也没有 ANTHROPIC_AUTH_TOKEN；在主机上运行"),
        ("en", "holds neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN; run `flower setup`"),
    ],
)
def test_a_gateway_without_a_key_refuses_to_start_in_its_runs_language(
    lang: str, said: str, sockdir: Path, tmp_path: Path
) -> None:
    process = gateway(tmp_path, sockdir / "api.sock", lang, key="")
    assert process.wait(timeout=60) == 2
    stderr = (tmp_path / f"gateway-{lang}.log").read_text()
    assert said in stderr and "Traceback" not in stderr


def test_the_broker_answers_in_its_operators_language(sockdir: Path, upstream: FakeAPI) -> None:
    """The client (this process: zh) frames what the broker said; the broker's own words are
    in the language it was started in, whoever asks."""
    brokers = []
    try:
        for lang in ("zh", "en"):
            (sockdir / lang).mkdir()
            brokers.append(BrokerProcess(sockdir / lang, upstream, ("--lang", lang)).start())
        zh, en = brokers
        with pytest.raises(BrokerError) as chinese:
            client.call(zh.folder, {"op": "shutdown"})
        assert str(chinese.value) == (
            "broker 拒绝了 shutdown：未知操作 'shutdown'：可用 register、revoke 或 status"
        )
        with pytest.raises(BrokerError) as english:
            client.call(en.folder, {"op": "shutdown"})
        assert str(english.value) == (
            "broker 拒绝了 shutdown：unknown op 'shutdown': register, revoke or status"
        )
        assert all(b.process is not None and b.process.poll() is None for b in brokers)
        not_its = {"zh": "这个请求没有携带运行 {} 的令牌", "en": "does not carry run {}'s token"}
        for broker, said in ((zh, not_its["zh"]), (en, not_its["en"])):
            one, two = broker.register(), broker.register()
            status, body = two.request(one.token)  # answered 401 before anything goes upstream
            assert status == 401 and body["error"]["type"] == "authentication_error"
            assert body["error"]["message"].startswith("flowerbox broker: ")
            assert said.format(two.run_id) in body["error"]["message"]
    finally:
        kill_left_running(broker.process for broker in brokers)


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ((), "错误： 无法绑定 broker 的控制套接字"),
        (("--lang", "en"), "error: cannot bind the broker's control socket"),
    ],
)
def test_a_broker_that_cannot_start_says_so_in_its_operators_language(
    flag: tuple[str, ...], said: str, tmp_path: Path
) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    env = {"HOME": str(deep), "PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-ant-x"}
    env["FLOWER_LANG"] = "zh"  # the operator's environment; --lang outranks it
    command = [sys.executable, "-m", "flowerbox", "broker", "--no-engine", *flag]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_a_malformed_push_is_refused_in_the_relays_language() -> None:
    """What the relay answers (400) a push it cannot read, in the suite's language: zh."""
    with pytest.raises(PushError, match="pkt-line 的长度不是四个十六进制数字：b'00zz'") as caught:
        read_push(iter([b"00zz"]))
    assert caught.value.status == 400


# What the egress proxy says of a name and of an address off its allowlist, and what the
# gateway says of a body that would make the API fetch a URL: the run's language in the 403 a
# process in the box reads and in the log a person reads; the `decision` stays the identifier.
DENIED = {
    "zh": (
        "不在允许列表中（用 --allow denied.test 允许）",
        "IP 地址（环回）不在允许列表中（用 --allow 127.0.0.2 允许）",
    ),
    "en": (
        "not in the allowlist (--allow denied.test to permit)",
        "an IP address (loopback) not in the allowlist (--allow 127.0.0.2 to permit)",
    ),
}
FETCHING = {
    "zh": "这个请求让 API 伸出盒子之外（document 来源于 'https://evil.test/big.pdf'）；已拒绝",
    "en": (
        "this request makes the API reach beyond the box (document source from "
        "'https://evil.test/big.pdf'); refused because"
    ),
}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_egress_proxy_refuses_and_logs_in_its_runs_language(
    lang: str, sockdir: Path, tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    proxy, log = sockdir / f"proxy-{lang}.sock", tmp_path / f"egress-{lang}.jsonl"
    args = ("--proxy-socket", str(proxy), "--egress-log", str(log), "--allow", "allowed.test")
    args += ("--allow", "127.0.0.1")
    process = gateway(tmp_path, sockdir / f"api-{lang}.sock", lang, args=args)
    started.append(process)
    wait_for(lambda: proxy.exists() or process.poll() is not None)
    asked = (
        b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n",
        b"GET http://127.0.0.2:9/ HTTP/1.1\r\nHost: 127.0.0.2:9\r\n\r\n",
    )
    where = ("denied.test:443", "127.0.0.2:9")
    for raw, target, reason in zip(asked, where, DENIED[lang], strict=True):
        head, _, body = exchange(proxy, raw).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 403 "), head
        said = body.decode().splitlines()[0]
        assert said == f"flowerbox egress: denied {target}: {reason}"
    wait_for(lambda: log.is_file() and len(log.read_text().splitlines()) == 2)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["decision"], e["reason"]) for e in entries] == [("deny", r) for r in DENIED[lang]]
    with socket.socket() as closed:  # bound, never listening: an allowed target refuses
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        raw = b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n" % port
        head, _, body = exchange(proxy, raw).partition(b"\r\n\r\n")
    unreachable = {"zh": f"无法连接 127.0.0.1:{port}：", "en": f"cannot reach 127.0.0.1:{port}: "}
    assert head.startswith(b"HTTP/1.1 502 ") and body.decode().startswith(
        f"flowerbox egress: {unreachable[lang]}"
    )
    wait_for(lambda: len(log.read_text().splitlines()) == 3)
    allowed = json.loads(log.read_text().splitlines()[2])
    listed = {"zh": "已列出：127.0.0.1", "en": "listed: 127.0.0.1"}
    assert (allowed["decision"], allowed["reason"]) == ("allow", listed[lang])


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_gateway_refuses_an_api_fetch_in_its_runs_language(
    lang: str,
    sockdir: Path,
    tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
    upstream: FakeAPI,
) -> None:
    sock = sockdir / f"api-{lang}.sock"
    process = gateway(tmp_path, sock, lang, upstream=upstream.url)
    started.append(process)
    wait_for(lambda: sock.exists() or process.poll() is not None)
    source = {"type": "url", "url": "https://evil.test/big.pdf"}
    content = [{"type": "document", "source": source}, {"type": "text", "text": "go"}]
    body = json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": content}],
        }
    ).encode()
    head = (
        "POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        f"x-api-key: sk-placeholder\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    status, _, answer = exchange(sock, head.encode() + body).partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 403 "), status
    message = json.loads(answer)["error"]["message"]
    assert message.startswith("flowerbox gateway: " + FETCHING[lang]), message
    other = FETCHING["en" if lang == "zh" else "zh"]
    assert other not in message and "--allow-api-fetch" in message
    assert upstream.requests == []


def exchange(sock: Path, raw: bytes) -> bytes:
    """What the server on `sock` answers `raw`, on a connection of its own, to its end."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(sock))
        conn.sendall(raw)
        conn.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: conn.recv(65536), b""))
