"""The gateway's request lines and each container's stderr outlive the box (issue 20, item 6),
in the run's host-only records, where the box cannot forge them; `flowerbox logs --requests`
shows them, cleaned of what the box put in. A real engine, as the unprivileged e2e user."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.testing import Always, FakeAPI, text
from tests.docker.e2e import FLOWERBOX, as_user, box_env, metas, state_of
from tests.json_contract import parse_document

pytestmark = pytest.mark.docker

# Run inside the box: one API call through the relay naming a model with a terminal escape in
# it, a line on stderr, and an attempt to plant a request line in the host's records.
INSIDE = """
import http.client, json, os, sys
model = "\\x1b]0;pwned\\x07evil-model"
ask = [{"role": "user", "content": "hi"}]
body = json.dumps({"model": model, "max_tokens": 50, "messages": ask})
conn = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
conn.request("POST", "/v1/messages?beta=true", body, {
    "x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json",
    "anthropic-version": "2023-06-01"})
print("status", conn.getresponse().status)
print("agent-stderr-marker", file=sys.stderr)
state = sys.argv[1]
try:
    os.makedirs(state + "/runs/forged/gateway", exist_ok=True)
    with open(state + "/runs/forged/gateway/requests.jsonl", "a") as f:
        f.write('{"model": "forged"}\\n')
    print("forged")
except OSError as exc:
    print("forging refused:", type(exc).__name__)
"""


def test_request_lines_and_stderr_are_kept_and_shown_by_logs_requests(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    real_api.script = Always(text("hello"))
    ws, env = user_workspace, box_env(real_api, host_user)
    state = state_of(host_user)
    done = as_user(
        host_user,
        [FLOWERBOX, "shell", "--", "python3", "-c", INSIDE, str(state)],
        cwd=ws,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "status 200" in done.stdout
    # Whether the box's write is refused depends on where the state folder's path falls in
    # the box (a suite home under /tmp is the box's own tmpfs there, where it may write):
    # what counts is that nothing of it reached the host's records (below).
    assert "forging refused" in done.stdout or "forged" in done.stdout
    (run_id,) = metas(host_user, ws)
    records = state / "runs" / run_id
    assert "agent-stderr-marker" in (records / "agent.stderr.log").read_text()
    gateway_lines = (records / "gateway.stderr.log").read_text()
    assert "flowerbox-gateway: listening" in gateway_lines and "evil-model" in gateway_lines
    assert not (state / "runs" / "forged").exists()  # nothing of the box's reached the records

    shown = as_user(host_user, [FLOWERBOX, "logs", run_id, "--requests", "--json"], cwd=ws, env=env)
    assert shown.returncode == 0, shown.stderr
    (request,) = parse_document(shown.stdout)["requests"]
    assert request["method"] == "POST" and request["status"] == 200
    assert request["model"] == "evil-model"  # the title-setting sequence gone whole
    assert request["tokens"]["output_tokens"] > 0 and request["cost_usd"] > 0
    table = as_user(host_user, [FLOWERBOX, "logs", run_id, "--requests"], cwd=ws, env=env)
    assert table.returncode == 0, table.stderr
    assert "POST /v1/messages?beta=true" in table.stdout and "\x1b" not in table.stdout
    assert "1 个请求 · $" in table.stderr  # the e2e runs speak zh
