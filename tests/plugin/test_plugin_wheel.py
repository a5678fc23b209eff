"""The plugin ships inside the wheel, and an installed flower loads it from there.

The wheel is built from this checkout with the project's own backend (offline, no build
isolation) and unpacked as pip would install it; a fresh interpreter imports flower from that
copy, so what is asserted is the installed layout, not the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from flower.testing import FakeAPI, sequence, text
from tests.plugin.files import SOURCE, manifest, skills

ROOT = SOURCE.parent


def build(target: str, source: Path, out: Path) -> Path:
    """Build one artifact of `source` into `out` with hatchling; its path."""
    if target == "wheel":
        command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-index", "--no-deps"]
        command += ["--no-build-isolation", "-w", str(out), str(source)]
    else:
        command = [sys.executable, "-m", "hatchling", "build", "-t", target, "-d", str(out)]
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(command, cwd=source, check=True, capture_output=True)
    [artifact] = out.glob("*.whl" if target == "wheel" else "*.tar.gz")
    return artifact


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build("wheel", ROOT, tmp_path_factory.mktemp("wheel"))


@pytest.fixture
def installed(wheel: Path, tmp_path: Path) -> Path:
    """The wheel unpacked as site-packages (a wheel is that tree, zipped), each file's mode
    restored from the archive as pip does (flower/core/reaper.sh must stay executable)."""
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
        for info in archive.infolist():
            if mode := (info.external_attr >> 16) & 0o777:
                (site / info.filename).chmod(mode)
    return site


def plugin_files() -> list[str]:
    return sorted(p.relative_to(SOURCE).as_posix() for p in SOURCE.rglob("*") if p.is_file())


def in_installed(site: Path, code: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run `code` in a fresh interpreter that imports flower from `site`; its JSON output."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=site.parent,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


REPORT = """
import json, flower
from flower.core.agent import PLUGIN_DIR, AgentSpec, build_options
print(json.dumps({"flower": flower.__file__, "dir": str(PLUGIN_DIR),
                  "plugins": build_options(AgentSpec("a", "")).plugins}))
"""


def test_the_wheel_carries_every_plugin_file_under_flower_plugin(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert [n.removeprefix("flower/plugin/") for n in names if n.startswith("flower/plugin/")] == (
        plugin_files()
    )
    assert ".claude-plugin/plugin.json" in plugin_files()
    assert not [n for n in names if n.startswith("plugin/")]


# Python 3.11.4 added extraction filters; Debian bookworm's python3 is 3.11.2 (our own sdist).
SAFE_EXTRACTION = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def test_the_sdist_carries_plugin_and_a_wheel_built_from_it_does_too(tmp_path: Path) -> None:
    sdist = build("sdist", ROOT, tmp_path / "sdist")
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]
        members = archive.getnames()
        archive.extractall(tmp_path / "unpacked", **SAFE_EXTRACTION)
    assert {f"{root}/plugin/{name}" for name in plugin_files()} <= set(members)
    rebuilt = build("wheel", tmp_path / "unpacked" / root, tmp_path / "rewheel")
    names = zipfile.ZipFile(rebuilt).namelist()
    assert {f"flower/plugin/{name}" for name in plugin_files()} <= set(names)


def test_an_installed_flower_resolves_plugin_dir_to_the_packaged_copy(installed: Path) -> None:
    found = in_installed(installed, REPORT)
    assert found["flower"] == str(installed / "flower" / "__init__.py")
    assert found["dir"] == str(installed / "flower" / "plugin")
    assert found["plugins"] == [{"type": "local", "path": str(installed / "flower" / "plugin")}]


def test_is_dir_still_guards_an_install_without_the_plugin(installed: Path) -> None:
    shutil.rmtree(installed / "flower" / "plugin")
    found = in_installed(installed, REPORT)
    assert found["dir"] == str(installed / "plugin")  # the source layout's place, also absent
    assert found["plugins"] == []


CLI_RUN = """
import asyncio, json, os
from claude_agent_sdk import ClaudeSDKClient, SystemMessage
from flower.core.agent import AgentSpec, build_options

async def main():
    options = build_options(AgentSpec("a", ""), cwd=os.environ["WS"])
    options.env = {**options.env, **json.loads(os.environ["CLI_ENV"])}
    async with ClaudeSDKClient(options) as client:
        await client.query("hi")
        async for message in client.receive_response():
            if isinstance(message, SystemMessage) and message.subtype == "init":
                print(json.dumps({"plugins": message.data["plugins"]}))

asyncio.run(main())
"""


def test_the_cli_started_by_an_installed_flower_loads_the_packaged_plugin(
    installed: Path, fake_api: FakeAPI, claude_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = sequence(text("done"))
    found = in_installed(
        installed, CLI_RUN, env={"WS": str(workspace), "CLI_ENV": json.dumps(claude_env)}
    )
    ours = [p for p in found["plugins"] if p["name"] == "flower"]  # type: ignore[union-attr]
    packaged = str(installed / "flower" / "plugin")
    assert ours == [
        {
            "name": "flower",
            "path": packaged,
            "source": "flower@inline",
            "version": manifest()["version"],
        }
    ]
    [request] = fake_api.main_requests()
    for page in skills():
        assert f"- flower:{page.name}: {page.description}" in request.system_text
