"""Issue 36 item 5 for flowerbox's host side: the refusals of the box, runs, hostgit and
selftest modules are said in the language of the command line (--lang, else $FLOWER_LANG),
Chinese under zh, English unchanged under en; exit 2 either way. (doctor's check lines:
tests/flowerbox/test_doctor.py.)

The command line runs for real (no engine needed: DOCKER_HOST points at nothing); the git,
shadow and untrusted-file refusals are raised by the real modules on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flowerbox.box import gitshadow
from flowerbox.box.untrusted import read_bytes
from flowerbox.errors import GitShadowError, HostGitError, UntrustedFileError
from flowerbox.hostgit import HostGit
from tests.cli.test_lang_cli import FLOWERBOX, run, speaking


def env_for(tmp_path: Path, lang: str, **extra: str) -> dict[str, str]:
    """A user with credentials, no engine and a home of its own, speaking `lang`."""
    home = tmp_path / "home"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
        "ANTHROPIC_API_KEY": "sk-ant-lang-box-0123456789",
        "FLOWERBOX_SOCKET_ROOT": str(tmp_path / "sockets"),
    }
    return speaking(env, lang) | extra


@pytest.mark.parametrize(
    ("args", "extra", "zh", "en"),
    [
        pytest.param(
            ["build", "{tmp}"],
            {},
            "不是 flowerbox 检出：请传入一个 flowerbox 检出",
            "is not a flowerbox checkout: pass a flowerbox checkout",
            id="source",
        ),
        pytest.param(
            ["selftest", "--weaken", "bogus"],
            {},
            "--weaken 'bogus'：请用 root_user",
            "--weaken 'bogus': use one of root_user",
            id="selftest",
        ),
        pytest.param(
            ["once", "hi", "--net", "open", "--runtime", "runsc"],
            {},
            "--net open 给容器一个自己的网络，而 gVisor 容器没有网络",
            "--net open gives the box a network of its own, which a gVisor box does not have",
            id="prepare",
        ),
        pytest.param(
            ["once", "hi"],
            {"FLOWERBOX_SOCKET_ROOT": "relative/sockets"},
            "FLOWERBOX_SOCKET_ROOT=relative/sockets 不是绝对路径：请给一个绝对路径，或取消设置它",
            "FLOWERBOX_SOCKET_ROOT=relative/sockets is not an absolute path: name one, or unset it",
            id="state",
        ),
        pytest.param(
            ["once", "hi", "-w", "{tmp}"],
            {},
            "home（你的主目录），代理绝不能看到那里",
            "home (your home folder), which the agent must never see",
            id="prepare-sensitive",
        ),
    ],
)
def test_box_refusals_follow_lang(
    tmp_path: Path, args: list[str], extra: dict[str, str], zh: str, en: str
) -> None:
    argv = [*FLOWERBOX, *(arg.format(tmp=tmp_path) for arg in args)]
    ws = tmp_path / "project"  # beside the home, not above it
    ws.mkdir()
    chinese = run(argv, env_for(tmp_path, "zh", **extra), ws)
    assert chinese.returncode == 2, chinese.stderr
    assert chinese.stderr.startswith("错误：") and zh in chinese.stderr, chinese.stderr
    assert "Traceback" not in chinese.stderr
    english = run([*argv, "--lang", "en"], env_for(tmp_path, "zh", **extra), ws)
    assert english.returncode == 2, english.stderr
    assert en in english.stderr and "Traceback" not in english.stderr


def test_the_json_fix_of_a_box_refusal_is_chinese_under_zh(tmp_path: Path) -> None:
    argv = [*FLOWERBOX, "once", "hi", "--json", "--net", "open", "--allow", "example.com"]
    done = run(argv, env_for(tmp_path, "zh"), tmp_path)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["message"].startswith("--allow 和 --allow-preset 过滤的是出口代理")
    assert error["fix"] == "请去掉它们，或去掉 --net open。"


def test_git_shadow_and_untrusted_file_refusals_speak_the_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The modules' own raises, on real files: a folder without git, a subcommand flowerbox
    never runs on the host, a link where the box should have left a file."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (tmp_path / "target").write_text("x")
    (plain / "link").symlink_to(tmp_path / "target")
    host = HostGit(hooks=tmp_path / "hooks")
    for lang, shadow, git, link in (
        ("zh", "不是 git 文件夹：没有可影子复制的", "flowerbox 不在主机上以那种形式运行",
         "是符号链接；flowerbox 不跟随也不读取它"),
        ("en", "is not a git folder: nothing to shadow", "does not run `git status` on the host",
         "a symbolic link; flowerbox does not follow or read it"),
    ):  # fmt: skip
        monkeypatch.setenv("FLOWER_LANG", lang)
        with pytest.raises(GitShadowError, match=shadow):
            gitshadow.make(plain, tmp_path / "dest", objects_in_box="/objects")
        with pytest.raises(HostGitError, match=git):
            host.run("status", workspace=plain)
        with pytest.raises(UntrustedFileError, match=link):
            read_bytes(plain, "link")
