"""The host install is hash-pinned (issue 37, L1): `make install` takes every third-party
package from requirements-dev.lock with --require-hashes, and flowerbox with --no-deps; that
lock pins every dependency and extra of pyproject.toml, with hashes, at the versions the
image's requirements.lock pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", re.M)


def pins(name: str) -> dict[str, str]:
    text = (REPO / name).read_text()
    blocks = [b for b in re.split(r"\n(?=[^\s#])", text) if re.match(r"[A-Za-z0-9_.-]+==", b)]
    assert all("--hash=sha256:" in block for block in blocks), f"a pin of {name} has no hash"
    return {m.group(1).lower(): m.group(2) for m in PIN.finditer(text)}


def test_the_host_lock_pins_every_dependency_with_hashes_as_the_image_does() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        wanted += extra
    host, image = pins("requirements-dev.lock"), pins("requirements.lock")
    for requirement in wanted:
        name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name in host, f"{name} (pyproject.toml) has no pin in requirements-dev.lock"
    for name, version in image.items():
        if name in host:
            assert host[name] == version, f"{name}: {host[name]} here, {version} in the image"


def test_make_install_takes_nothing_unpinned() -> None:
    recipe = (REPO / "Makefile").read_text().split("$(VENV)/.installed:", 1)[1].split("\n\n")[0]
    installs = [line.strip() for line in recipe.splitlines() if "pip install" in line]
    assert installs == [
        "$(BIN)/python -m pip install -q --require-hashes -r requirements-dev.lock",
        "$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .",
    ]
