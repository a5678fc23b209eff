"""The box's cost: start-to-first-API-request of `flowerbox once` vs `flower once` on the host,
and the image's size over its base.

Both commands answer the same FakeAPI script (on 127.0.0.1, requiring the key passed in
ANTHROPIC_API_KEY: in the box only the gateway holds it), interleaved in the same run, each
round in a fresh workspace; the time is from the process's start to the first /v1/messages
request the FakeAPI receives. The box adds the gateway's and the agent's container starts, the
relay and the hop through the gateway. The gateway's per-request streaming overhead is
bench/gateway.py's. Run as it is, with the host's environment (as root here, the box runs as
uid 0). Targets: <= 1.5 s added to the first request; <= 520 MB of layers over the base image.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from docker import DockerClient  # noqa: TID251 - the benchmark weighs the images itself
from docker.errors import DockerException, ImageNotFound  # noqa: TID251

from flower.testing import Always, FakeAPI, text

ROUNDS = 5
TARGET_ADDED_S = 1.5
TARGET_IMAGE_MB = 520
KEY = "sk-bench-real-key"
IMAGE = os.environ.get("FLOWERBOX_IMAGE", "flowerbox:dev")
BASE_IMAGE = os.environ.get("FLOWERBOX_BASE_IMAGE", "flowerbox-base:bookworm")
PROMPT = "say hi"


def first_request(api: FakeAPI, command: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from starting `command` to the FakeAPI's first messages request."""
    api.reset()
    started = time.time()
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0 or not api.messages_requests():
        raise RuntimeError(f"{command[:4]} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return api.messages_requests()[0].received_at - started


def image_mb() -> tuple[float, float]:
    """The image's and its base's sizes, in MB."""
    client = DockerClient.from_env()
    try:
        size = {tag: client.images.get(tag).attrs["Size"] / 1e6 for tag in (IMAGE, BASE_IMAGE)}
    finally:
        client.close()
    return size[IMAGE], size[BASE_IMAGE]


def main() -> int:
    try:
        image, base = image_mb()
    except (DockerException, ImageNotFound) as exc:
        print(f"skipped: no engine or no {IMAGE}/{BASE_IMAGE} ({exc}): bash docker/engine.sh")
        return 0
    host_env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FLOWER_"))}
    boxed, direct = [], []
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp, FakeAPI(api_key=KEY) as api:
        api.script = Always(text("hi"))
        box_env = {**host_env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.url}
        for round_ in range(ROUNDS + 1):  # round 0 warms both up (page cache, first start)
            ws = Path(tmp) / f"round-{round_}"
            (ws / "home").mkdir(parents=True)
            flower_env = {**host_env, **api.env(home=ws / "home"), "FLOWER_NO_UPDATE": "1"}
            flower = [sys.executable, "-m", "flower.cli", "once", PROMPT, "-w", str(ws)]
            flower += ["--run-dir", str(ws / "runs-host")]
            box = [sys.executable, "-m", "flowerbox", "once", PROMPT, "-w", str(ws)]
            box += ["--image", IMAGE]
            d = first_request(api, flower, flower_env, ws)
            b = first_request(api, box, box_env, ws)
            if round_:
                direct.append(d)
                boxed.append(b)
    d, b = statistics.median(direct), statistics.median(boxed)
    added, layers = b - d, image - base
    print(f"start to first API request, median of {ROUNDS} rounds (s):")
    print(f"  flower once on the host    {d:6.2f}")
    print(f"  flowerbox once             {b:6.2f}")
    print(f"  added by the box {added:.2f} s (target <= {TARGET_ADDED_S} s)")
    print("  streaming overhead per request through the gateway: see bench.gateway")
    print(f"image {IMAGE} {image:.0f} MB over {BASE_IMAGE} {base:.0f} MB:")
    print(f"  layers added {layers:.0f} MB (target <= {TARGET_IMAGE_MB} MB)")
    return 0 if added <= TARGET_ADDED_S and layers <= TARGET_IMAGE_MB else 1


if __name__ == "__main__":
    sys.exit(main())
