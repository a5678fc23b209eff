"""Inside flowerbox the gateway's meter is the reference: flower's own figure for a run agrees
with it (issue 20, item 1). One box, a judged job whose round 2 resumes the coordinator's
session (the case where flower's live cost used to fall behind the gateway's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.docker.e2e import FLOWERBOX, as_user, box_env, usage_of
from tests.json_contract import parse_document

pytestmark = pytest.mark.docker


def test_flowers_figure_for_a_resumed_round_is_the_gateways(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    real_api.script = starter_cast(verdicts=["未达成", "达成"])
    done = as_user(
        host_user,
        [FLOWERBOX, DEMO_ASK, "--timeout", "0", "--rounds", "2", "--json"],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = parse_document(done.stdout[done.stdout.index("{") :])
    assert [s["name"] for s in summary["steps"]][-2:] == ["干活#round2", "干活·判定#2"]
    metered = usage_of(host_user, user_workspace)["total_cost_usd"]
    assert summary["cost_usd"] == pytest.approx(metered, abs=2e-6)  # flower's, the gateway's
    assert metered == pytest.approx(real_api.cost(), abs=2e-6)  # and what the answers cost
    live = re.findall(r"\$(\d+\.\d{4}) · context", done.stderr)  # flower's live line
    assert float(live[-1]) == pytest.approx(metered, abs=5e-5)
