"""`flowerbox doctor`'s misses that need no engine: no engine, no credentials, a workspace that
is not a git repository or is $HOME; and credentials reported by origin, never by value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english

FLOWERBOX = str(Path(sys.executable).with_name("flowerbox"))
SECRET = "sk-ant-doctor-" + "0123456789abcdef0123"


def doctor(tmp_path: Path, workspace: Path, **env: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",  # a bogus engine: nothing answers
    }
    return subprocess.run(
        [FLOWERBOX, "doctor", "-w", str(workspace)],
        env={**base, **env},
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )


def lines(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """check name -> its line and, for a miss, the fix line under it."""
    found: dict[str, str] = {}
    last = ""
    for line in done.stdout.splitlines():
        if line.startswith(("OK", "FAIL", "正常", "失败")):
            last = line.split()[1]
            found[last] = line
        elif line.strip().startswith(("fix:", "修复：")):
            found[last] += "\n" + line.strip()
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    return ws


def test_no_engine_is_a_miss_with_a_fix_and_what_needs_it_says_so(
    tmp_path: Path, repo: Path
) -> None:
    done = doctor(tmp_path, repo, ANTHROPIC_API_KEY=SECRET)
    assert done.returncode == 1
    found = lines(done)
    assert found["engine"].startswith("FAIL") and "no-engine.sock" in found["engine"]
    assert "fix: start it" in found["engine"] and "DOCKER_HOST" in found["engine"]
    assert found["image"].startswith("FAIL") and "without an engine" in found["image"]
    assert found["gvisor"].startswith("OK")  # not asked for: no miss
    assert found["credentials"].startswith("OK") and found["workspace"].startswith("OK")
    asked = lines(doctor(tmp_path, repo, ANTHROPIC_API_KEY=SECRET, FLOWERBOX_RUNTIME="runsc"))
    assert asked["gvisor"].startswith("FAIL") and "without an engine" in asked["gvisor"]
    for name in ("gateway", "proxy"):
        assert found[name].startswith("FAIL") and "fix the misses above" in found[name]
    assert SECRET not in done.stdout + done.stderr
    assert "ANTHROPIC_API_KEY from the process environment" in found["credentials"]


def test_credentials_name_their_file_never_their_value(tmp_path: Path, repo: Path) -> None:
    (repo / ".env").write_text(f"ANTHROPIC_API_KEY={SECRET}\n")
    unread = lines(doctor(tmp_path, repo))  # a workspace .env is the box's to write
    assert unread["credentials"].startswith("FAIL")
    assert "never reads a workspace .env" in unread["credentials"]
    global_env = tmp_path / "home" / ".config" / "flower" / ".env"
    global_env.parent.mkdir(parents=True)
    global_env.write_text(f"ANTHROPIC_API_KEY={SECRET}\n")
    done = doctor(tmp_path, repo)
    found = lines(done)
    assert found["credentials"].startswith("OK") and str(global_env) in found["credentials"]
    assert SECRET not in done.stdout + done.stderr and SECRET[:8] not in done.stdout


def test_no_credentials_is_a_miss_that_says_where_they_go(tmp_path: Path, repo: Path) -> None:
    done = doctor(tmp_path, repo, ANTHROPIC_API_KEY="", ANTHROPIC_AUTH_TOKEN="")
    assert done.returncode == 1
    found = lines(done)
    assert found["credentials"].startswith("FAIL")
    assert "fix: run `flowerbox setup`" in found["credentials"]


def test_a_workspace_that_is_not_a_repository_is_a_miss(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = doctor(tmp_path, plain, ANTHROPIC_API_KEY=SECRET)
    assert done.returncode == 1
    found = lines(done)
    assert found["workspace"].startswith("FAIL")
    assert "not the top folder of a git repository" in found["workspace"]
    assert "fix: run `git init" in found["workspace"] and "--no-isolate" in found["workspace"]


def test_home_itself_is_refused_as_a_workspace(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=home, check=True)
    done = doctor(tmp_path, home, ANTHROPIC_API_KEY=SECRET)
    found = lines(done)
    assert found["workspace"].startswith("FAIL") and "refusing to mount" in found["workspace"]
    assert "fix: run flowerbox from a project folder" in found["workspace"]


def test_a_bad_protect_config_is_a_workspace_miss(tmp_path: Path, repo: Path) -> None:
    (repo / ".flowerbox").mkdir()
    (repo / ".flowerbox" / "config.toml").write_text('protect = ["../outside"]\n')
    found = lines(doctor(tmp_path, repo, ANTHROPIC_API_KEY=SECRET))
    assert found["workspace"].startswith("FAIL") and "../outside" in found["workspace"]


def test_the_checks_are_said_in_chinese_under_zh(tmp_path: Path, repo: Path) -> None:
    """Each check's name, what it found and its fix follow the language (issue 36 item 5);
    the English above is what the same checks say without it."""
    (repo / ".flowerbox").mkdir()
    (repo / ".flowerbox" / "config.toml").write_text('protect = "deploy/"\n')  # not a list
    done = doctor(tmp_path, repo, ANTHROPIC_API_KEY=SECRET, FLOWER_LANG="zh")
    assert done.returncode == 1, done.stderr
    found = lines(done)
    assert list(found) == [
        "引擎", "gvisor", "镜像", "凭据", "工作区", "用户", "状态", "网关", "出口代理",
    ]  # fmt: skip
    assert (
        found["引擎"].startswith("失败  引擎         ") and "没有 Docker 引擎应答" in found["引擎"]
    )
    assert "修复：请启动它（`systemctl start docker`" in found["引擎"]
    assert found["镜像"].startswith("失败") and "没有引擎，无法查看" in found["镜像"]
    assert found["凭据"].startswith("正常") and "ANTHROPIC_API_KEY 来自 进程环境" in found["凭据"]
    assert (
        found["工作区"].startswith("失败") and "修复：`protect` 必须是路径列表" in found["工作区"]
    )
    assert "修复：先修好上面的问题" in found["出口代理"]
    assert SECRET not in done.stdout + done.stderr
    english = doctor(tmp_path, repo, ANTHROPIC_API_KEY=SECRET, FLOWER_LANG="en")
    said = lines(english)
    assert list(said)[:3] == ["engine", "gvisor", "image"]
    assert "fix: `protect` must be a list of paths" in said["workspace"]
    assert not any("\u4e00" <= char <= "\u9fff" for char in english.stdout)
