"""flower's process loads what the SDK uses of mcp, not mcp's client and servers (issue 31:
a box's flower process, one per run), and every name of mcp still resolves."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from flower.core.lazyinit import defer_package_init


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_sdk_with_mcp_deferred_loads_neither_mcps_client_nor_its_high_level_server(
    tmp_path: Path,
) -> None:
    done = run(
        """
        import sys
        from flower.core.lazyinit import defer_mcp
        defer_mcp()
        import claude_agent_sdk
        from flower.core.human import HumanChannel
        HumanChannel()
        print(" ".join(sorted(sys.modules)))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(done.stdout.split())
    assert {"mcp.types", "mcp.server.lowlevel", "claude_agent_sdk"} <= loaded
    unused = {m for m in loaded if m.startswith(("mcp.client", "mcp.server.mcpserver", "httpx"))}
    assert not unused, sorted(unused)


def test_every_name_of_a_deferred_mcp_resolves_to_what_its_init_binds(tmp_path: Path) -> None:
    done = run(
        """
        from flower.core.lazyinit import defer_mcp
        defer_mcp()
        import claude_agent_sdk
        import mcp
        import mcp.server
        from mcp.client.session import ClientSession
        from mcp.server.lowlevel import Server
        assert mcp.ClientSession is ClientSession      # from its `from .x import y` lines
        assert mcp.server.Server is Server
        assert "stdio_client" in mcp.__all__           # any other name: the real __init__
        from mcp import *
        print("ok", stdio_client.__module__)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", "mcp.client.stdio"]


def test_a_deferred_init_runs_only_when_a_name_it_binds_otherwise_is_asked_for(
    tmp_path: Path,
) -> None:
    package = tmp_path / "deferred_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import os\nfrom .light import LIGHT\nRAN = True\nos.environ['DEFERRED_PKG_RAN'] = '1'\n"
    )
    (package / "light.py").write_text("LIGHT = object()\n")
    done = run(
        """
        import os, sys
        from flower.core.lazyinit import defer_package_init
        module = defer_package_init("deferred_pkg")
        from deferred_pkg import LIGHT
        from deferred_pkg.light import LIGHT as REAL
        assert LIGHT is REAL and "DEFERRED_PKG_RAN" not in os.environ
        import deferred_pkg
        assert deferred_pkg.RAN and os.environ["DEFERRED_PKG_RAN"] == "1"
        assert deferred_pkg.LIGHT is REAL and sys.modules["deferred_pkg"] is module
        assert defer_package_init("deferred_pkg") is None   # imported already: left alone
        print("ok")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok"]
    assert defer_package_init("no_such_package_here") is None
