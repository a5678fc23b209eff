"""The retry limits on the command line: --retries (attempts of a step after failures) and
--offline-wait (how long a step waits for the API to come back), on go, resume, once, run."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from flower.testing import Always, FakeAPI, http_error, text
from tests.cli.conftest import flower


def test_retries_1_gives_a_failing_step_no_second_attempt(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = Always(text("never", fault=http_error(500)))  # retryable: flower retries
    done = flower("once", "hi", "--retries", "1", "-w", str(workspace), env=cli_env, cwd=workspace)
    assert done.returncode == 1, done.stderr
    assert "attempt 1 failed" not in done.stdout  # flower's retry (the CLI's own are 2)
    [row] = json.loads((workspace / "runs" / "manifest.json").read_text())
    assert row["attempts"] == 1 and len(row["errors"]) == 1


def test_offline_wait_0_gives_up_at_once_when_the_api_is_unreachable(
    cli_env: dict[str, str], workspace: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens there
    env = {**cli_env, "ANTHROPIC_BASE_URL": closed}
    started = time.monotonic()
    done = flower("once", "hi", "--offline-wait", "0", "-w", str(workspace), env=env, cwd=workspace)
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 60  # the default waits up to an hour
    [row] = json.loads((workspace / "runs" / "manifest.json").read_text())
    assert row["attempts"] == 1


@pytest.mark.english  # click's and flower's English words
@pytest.mark.parametrize(
    "args",
    [["x", "--retries", "0"], ["once", "x", "--offline-wait", "-1"], ["resume", "--retries", "0"]],
)
def test_a_retry_limit_flower_cannot_use_is_refused(
    cli_env: dict[str, str], workspace: Path, args: list[str]
) -> None:
    done = flower(*args, "-w", str(workspace), env=cli_env, cwd=workspace)
    assert done.returncode == 2 and "Invalid value for" in done.stderr
