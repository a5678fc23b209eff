"""What the cluster broker keeps of a run for its git relay (its repository and image), as
Secrets about that run come and go: in-process, no request served."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowerbox.broker.listener import ClusterBroker, RunToken
from flowerbox.errors import BrokerError
from flowerbox.sidecar.gateway import Credentials
from flowerbox.sidecar.pricing import PriceTable

RUN = "20261202-000000-aaaaaa"
TOKEN = "the-runs-token"
REPO = "https://git.example/acme/app.git"


def told(token: str, repo: str, image: str = "flowerbox:1") -> RunToken:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return RunToken(RUN, digest, None, (), repo=repo, image=image, namespace="ns")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ClusterBroker]:
    local = ("127.0.0.1", 0)
    made = ClusterBroker(
        tmp_path, api=local, proxy=local, credentials=Credentials("http://127.0.0.1:9"),
        prices=PriceTable(),
    )  # fmt: skip
    try:
        yield made
    finally:
        made.close()


def test_a_second_secret_for_a_live_run_changes_nothing_the_relay_knows(
    broker: ClusterBroker,
) -> None:
    """Attack: a Secret with the live run's id and another token, or the run's own Secret
    edited, names another repository and image. Neither is the run as it was learned: the
    relay goes on taking the run's token to its own repository alone, with its image."""
    broker.learn(told(TOKEN, REPO))
    broker.running(frozenset({RUN}))  # its Job runs (flowerbox.broker.tokens.Holders)
    with pytest.raises(BrokerError, match="已以另一个令牌登记"):
        broker.learn(told("another-token", "https://git.example/acme/secrets.git", "evil"))
    broker.learn(told(TOKEN, "https://git.example/acme/secrets.git", "evil"))  # edited
    run = broker.relay_run(TOKEN)
    assert run is not None and (run.repo, run.image) == (REPO, "flowerbox:1")
    assert broker.relay_run("another-token") is None


def test_a_run_whose_job_ended_has_no_way_to_its_repository(broker: ClusterBroker) -> None:
    """Attack L2, at the relay: a token of a run with no running Job reaches nothing."""
    broker.learn(told(TOKEN, REPO))
    assert broker.relay_run(TOKEN) is None  # no Job of it runs yet
    broker.running(frozenset({RUN}))
    assert broker.relay_run(TOKEN) is not None
    broker.running(frozenset())
    assert broker.relay_run(TOKEN) is None
