"""Gateway overhead: a streamed model turn straight to a FakeAPI vs through relay + gateway.

Both paths are measured in the same run, interleaved, each request on a fresh TCP connection
(the FakeAPI closes every stream, so the direct path cannot reuse one either), timed from the
request's first byte to the response's last. The gateway runs as its own process with a
credentials file, a budget (each request reserved, then settled), a usage file rewritten after
every request, and the relay in front of it, exactly as in a box. Target: <= 5 ms added per
request (median). `--smoke`: 10 requests, the target not judged (python -m bench --smoke).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import _args
from flower.testing import Always, FakeAPI, Usage, text
from flowerbox import wire

REQUESTS = 300
SMOKE_REQUESTS = 10
WARM_UP = 20
TARGET_MS = 5.0
KEY = "sk-bench-real-key"
BODY = json.dumps(
    {
        "model": "claude-opus-5-5",
        "max_tokens": 1000,
        "stream": True,
        "messages": [{"role": "user", "content": "x" * 4000}],
    }
).encode()


def timed(port: int, key: str) -> float:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/v1/messages?beta=true", body=BODY, headers={"x-api-key": key})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    assert response.status == 200 and body.rstrip().endswith(b'{"type": "message_stop"}'), body
    return time.perf_counter() - started


def main(*, smoke: bool = False) -> int:
    requests, warm_up = (SMOKE_REQUESTS, 2) if smoke else (REQUESTS, WARM_UP)
    reply = text("a streamed answer " * 50, usage=Usage(2000, 300, 10_000, 500))
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp, FakeAPI(Always(reply), api_key=KEY) as api:
        root = Path(tmp)
        creds = root / "creds.env"
        creds.touch(mode=0o600)
        creds.write_text(f"ANTHROPIC_API_KEY={KEY}\nANTHROPIC_BASE_URL={api.url}\n")
        sock = root / "api.sock"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        gateway = subprocess.Popen(
            [sys.executable, "-m", wire.GATEWAY_MODULE, "--socket", str(sock)]
            + ["--credentials", str(creds), "--usage", str(root / "usage.json")]
            # A budget, so each request also passes the budget's admission control.
            + ["--budget", "1000"],
            stderr=subprocess.DEVNULL,
            env=env,
        )
        relay = subprocess.Popen(
            [sys.executable, "-m", wire.RELAY_MODULE, "--listen", f"127.0.0.1:0={sock}"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            while not sock.exists():
                time.sleep(0.01)
            assert relay.stdout is not None
            relay_port = int(relay.stdout.readline().split()[1].rpartition(":")[2])
            for _ in range(warm_up):  # warm up both paths (imports, first connections)
                timed(api.port, KEY), timed(relay_port, "placeholder")
            direct, boxed = [], []
            for _ in range(requests):
                direct.append(timed(api.port, KEY))
                boxed.append(timed(relay_port, "placeholder"))
        finally:
            for process in (relay, gateway):
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=10)
            if relay.stdout is not None:
                relay.stdout.close()
    d, b = statistics.median(direct) * 1000, statistics.median(boxed) * 1000
    added = b - d
    print(f"{requests} streamed requests, each on a new connection, median (ms):")
    print(f"  straight to the FakeAPI    {d:6.2f}")
    print(f"  through relay + gateway    {b:6.2f}")
    print(f"  added per request {added:.2f} ms (target <= {TARGET_MS} ms)")
    return 0 if added <= TARGET_MS or smoke else 1


if __name__ == "__main__":
    sys.exit(main(smoke=_args.parse("bench.gateway", __doc__).smoke))
