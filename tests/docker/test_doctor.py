"""`flowerbox doctor` on a real engine, as the e2e user: all OK where a run would work (the
gateway's health reaches the fake API on the host's loopback, the proxy refuses a name), and a
missing image tag is a miss with its fix. (The misses without an engine: tests/flowerbox.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.docker.e2e import FLOWERBOX, REAL, as_user, box_env

pytestmark = pytest.mark.docker


def test_doctor_is_all_ok_where_a_run_would_work(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    env = {**box_env(real_api, host_user), "FLOWER_LANG": "en"}  # the English check lines
    done = as_user(host_user, [FLOWERBOX, "doctor"], cwd=user_workspace, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    names = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("OK")]
    assert names == [
        "engine",
        "gvisor",
        "image",
        "credentials",
        "workspace",
        "user",
        "state",
        "gateway",
        "proxy",
    ]
    [gvisor] = [line for line in done.stdout.splitlines() if line.split()[1:2] == ["gvisor"]]
    assert "the engine offers runsc" in gvisor or "the engine has no runsc" in gvisor
    if "offers" in gvisor:  # the platform docker/gvisor.sh registered, as the engine says it
        assert " platform " in gvisor, gvisor
    assert "ANTHROPIC_API_KEY from the process environment" in done.stdout
    assert "upstream is reachable" in done.stdout and "logged deny" in done.stdout
    assert REAL not in done.stdout + done.stderr
    assert real_api.requests == []  # health is a TCP check: no model call, no key spent


def test_doctor_says_its_box_findings_in_the_runs_language(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    """zh (the suite's): the gateway's and the proxy's findings, from the self-test's verdicts
    judged on this host, are Chinese too."""
    done = as_user(
        host_user, [FLOWERBOX, "doctor"], cwd=user_workspace, env=box_env(real_api, host_user)
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    [gateway] = [line for line in lines if line.split()[1:2] == ["网关"]]
    [proxy] = [line for line in lines if line.split()[1:2] == ["出口代理"]]
    assert gateway.startswith("正常") and "网关已启动，它的上游可以连通" in gateway
    assert proxy.startswith("正常") and "CONNECT 和普通 HTTP 都得到 403，日志记为 deny" in proxy
    assert "logged deny" not in done.stdout and "upstream is reachable" not in done.stdout


def test_a_missing_image_is_a_miss_with_its_fix(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    env = {**box_env(real_api, host_user), "FLOWERBOX_IMAGE": "flowerbox:no-such-tag"}
    env["FLOWER_LANG"] = "en"  # the English check lines (tests/flowerbox/test_doctor.py: zh)
    done = as_user(host_user, [FLOWERBOX, "doctor"], cwd=user_workspace, env=env)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    [image] = [i for i, line in enumerate(lines) if line.split()[1:2] == ["image"]]
    assert lines[image].startswith("FAIL") and "flowerbox:no-such-tag is not here" in lines[image]
    assert "fix: run `flowerbox build`" in lines[image + 1]
    assert lines[0].startswith("OK    engine")
