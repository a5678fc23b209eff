"""A run through the broker when one is running (flowerbox.broker), else as before.

    spec = through_broker(spec)     # registered: the broker serves its sockets, the box's
    ...                             # key is the run's token
    leave_broker(spec)              # the run ended: its token is revoked

Every `flowerbox "ask"` asks whether a broker runs, so this loads only the control protocol;
the broker itself (`flowerbox broker`) is flowerbox.runs.brokerserve.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

from flowerbox.box import state
from flowerbox.box.spec import BoxSpec
from flowerbox.broker import client
from flowerbox.broker.control import Registration
from flowerbox.errors import BrokerError

__all__ = ["leave_broker", "through_broker"]


def through_broker(spec: BoxSpec) -> BoxSpec:
    """`spec` registered with the running broker, or `spec` itself when none runs.

    Raises:
        BrokerError: a broker runs but refused the run (the reason is in the message).
    """
    folder = state.broker_folder()
    if not client.running(folder):
        return spec
    allow = spec.allow if spec.net == "allowlist" else None
    asked = Registration(
        spec.run_id,
        spec.socket_dir,
        spec.gateway_dir,
        spec.budget_usd,
        allow,
        spec.allow_api_fetch,
    )
    token = client.register(folder, asked)
    return replace(spec, broker=True, run_token=token)


def leave_broker(spec: BoxSpec) -> None:
    """The run ended: the broker revokes its token. A broker that is down revokes it when it
    starts again (its box is gone), so that is no failure here."""
    if spec.broker:
        with contextlib.suppress(BrokerError):
            client.revoke(state.broker_folder(), spec.run_id)
