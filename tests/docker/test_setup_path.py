"""The real-key path a user takes, on a real engine as the unprivileged e2e user: `flowerbox
setup` saves the key (read from a variable, as in CI) and probes it, then `flowerbox "ask"`
finds it by flower's lookup with nothing in the environment. The fake API stands in for the
real one and accepts only that key."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flower.testing import FakeAPI, text
from flower.testing.demo import DEMO_ASK, starter_cast
from flower.testing.request import fingerprint
from tests.docker.e2e import FLOWERBOX, REAL, as_user, box_env, usage_of
from tests.json_contract import parse_document

pytestmark = pytest.mark.docker


def test_setup_then_ask_runs_on_the_saved_key_alone(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    config = user_workspace.parent / "config"  # the user's XDG_CONFIG_HOME for this test
    config.mkdir()
    os.chown(config, *host_user[1:])
    env = {k: v for k, v in box_env(real_api, host_user).items() if not k.startswith("ANTHROPIC_")}
    env["XDG_CONFIG_HOME"] = str(config)

    real_api.script = lambda request: text("ok")  # the probe's one request
    saved = as_user(
        host_user,
        [FLOWERBOX, "setup", "--key-from-env", "CI_SECRET", "--base-url", real_api.url],
        cwd=user_workspace,
        env={**env, "CI_SECRET": REAL},
    )
    assert saved.returncode == 0, saved.stderr
    dotenv = config / "flower" / ".env"
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    assert f"ANTHROPIC_API_KEY={REAL}" in dotenv.read_text()
    assert REAL not in saved.stdout + saved.stderr  # shown masked
    probes = len(real_api.requests)
    assert probes == 1 and real_api.saw_key(REAL)

    real_api.script = starter_cast(ask_human=False)
    done = as_user(
        host_user,
        [FLOWERBOX, DEMO_ASK, "--timeout", "0", "--json", "-w", str(user_workspace)],
        cwd=user_workspace,
        env=env,  # no ANTHROPIC_* at all: the key comes from the file setup wrote
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert parse_document(done.stdout)["status"] == "achieved"
    assert len(real_api.requests) > probes
    assert {request.key_fingerprint for request in real_api.requests} == {fingerprint(REAL)}
    usage = usage_of(host_user, user_workspace)
    assert usage["client_credentials"] == {"placeholder": usage["requests"]}
