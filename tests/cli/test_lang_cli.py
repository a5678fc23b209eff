"""Issue 36 item 5: `--lang` governs what a person reads on the real command lines: the help,
the refusals (exit 2, the JSON `error.fix` too) and the end of a run, in flower and flowerbox;
English unchanged by default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from flower.testing import FakeAPI, sequence, text
from tests.cli.conftest import FLOWER, flower, offline_env

FLOWERBOX = [sys.executable, "-m", "flowerbox"]
CJK = re.compile(r"[\u4e00-\u9fff]")


def speaking(env: dict[str, str], lang: str | None) -> dict[str, str]:
    """`env` with FLOWER_LANG set (or unset, under a C locale) and a wide terminal."""
    out = {k: v for k, v in env.items() if k not in ("FLOWER_LANG", "LC_ALL", "LC_MESSAGES")}
    out |= {"LANG": "C.UTF-8", "COLUMNS": "200"}
    return out | ({"FLOWER_LANG": lang} if lang else {})


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_help_is_chinese_under_lang_zh_and_english_by_default(tmp_path: Path) -> None:
    base = speaking(dict(os.environ), None)
    flag = run([*FLOWER, "--help", "--lang", "zh"], base, tmp_path)  # the flag, anywhere
    assert flag.returncode == 0, flag.stderr
    assert "用 Claude Code 跑长时间的工作" in flag.stdout and "选项" in flag.stdout
    assert "Run long-horizon work" not in flag.stdout and "Show this message" not in flag.stdout
    go = run([*FLOWER, "go", "--help"], speaking(base, "zh"), tmp_path)  # $FLOWER_LANG
    assert "澄清需求，定下目标" in go.stdout and "美元后停止花钱" in go.stdout
    box = run([*FLOWERBOX, "ps", "--help"], speaking(base, "zh"), tmp_path)
    assert box.returncode == 0 and "列出运行（最新的在最后）" in box.stdout
    english = run([*FLOWER, "go", "--help"], base, tmp_path)
    assert "Clarify the ask, freeze a goal" in english.stdout and "Options" in english.stdout
    assert not CJK.search(english.stdout)
    boxed = run([*FLOWERBOX, "--help", "--lang", "en"], speaking(base, "zh"), tmp_path)
    assert "Run flower unattended in a hardened container" in boxed.stdout
    assert not CJK.search(boxed.stdout)


def test_a_bad_option_value_is_refused_in_chinese(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    env = speaking(offline_env(fake_api, claude_home), "zh")
    done = flower("once", "hi", "--budget", "0", "-w", str(workspace), env=env, cwd=workspace)
    assert done.returncode == 2, done.stderr
    assert "'--budget' 的值无效：0 美元不是预算：请给出大于 0 的数" in done.stderr
    assert "错误" in done.stderr and "Invalid value" not in done.stderr
    unknown = run([*FLOWERBOX, "ps", "--bogus"], env, workspace)  # click's own refusal
    assert unknown.returncode == 2 and "没有这个选项：--bogus" in unknown.stderr
    english = flower(
        "once", "hi", "--budget", "0", "-w", str(workspace), env=speaking(env, "en"), cwd=workspace
    )
    assert english.returncode == 2 and "0 USD is no budget: pass more than 0" in english.stderr
    assert fake_api.requests == []


def test_a_workspace_outside_git_is_refused_in_chinese_with_the_fix_in_json(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    env = speaking(offline_env(fake_api, claude_home), "zh")
    args = ("an ask", "--isolate", "--timeout", "0", "-w", str(workspace))
    done = flower(*args, "--json", env=env, cwd=workspace.parent)
    assert done.returncode == 2, done.stderr
    assert "错误：" in done.stderr and "不是 git 仓库，而隔离的工作者需要 git 工作树" in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["fix"] == "在那里运行 `git init`（并提交一次），或加 --no-isolate。"
    english = flower(*args, "--json", env=speaking(env, "en"), cwd=workspace.parent)
    assert english.returncode == 2 and "error: " in english.stderr
    assert json.loads(english.stdout)["error"]["fix"] == (
        "Run `git init` there (and commit once), or pass --no-isolate."
    )
    assert fake_api.requests == []


def test_missing_credentials_are_said_in_chinese(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    env = speaking(offline_env(fake_api, claude_home), "zh")
    del env["ANTHROPIC_API_KEY"]
    done = flower("once", "hi", "--json", "-w", str(workspace), env=env, cwd=workspace.parent)
    assert done.returncode == 2, done.stderr
    assert "没有凭据：ANTHROPIC_API_KEY 和 ANTHROPIC_AUTH_TOKEN 都没有设置或为空" in done.stderr
    assert json.loads(done.stdout)["error"]["fix"].startswith("运行 `flower setup`（它把密钥存到")


def test_flowerbox_refuses_in_chinese(tmp_path: Path) -> None:
    env = speaking(dict(os.environ), "zh")
    done = run([*FLOWERBOX, "logs", "-w", str(tmp_path)], env, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "错误：" in done.stderr and "里没有 flowerbox 运行" in done.stderr
    english = run([*FLOWERBOX, "logs", "-w", str(tmp_path)], speaking(env, "en"), tmp_path)
    assert english.returncode == 2 and "no flowerbox runs in" in english.stderr


def test_the_end_of_a_run_is_said_in_the_run_language(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    fake_api.script = sequence(text("你好"), text("hello"))
    env = speaking(offline_env(fake_api, claude_home), "zh")
    zh = flower("once", "say hi", "-w", str(workspace), env=env, cwd=workspace)
    assert zh.returncode == 0, zh.stderr
    ended, drawn = zh.stdout.strip().splitlines()[-2:]
    assert re.fullmatch(r"完成 · \$\d+\.\d{4} · 退出码 0", ended), ended
    assert drawn.startswith("运行图:flower report")
    en = flower("once", "say hi", "-w", str(workspace), env=speaking(env, None), cwd=workspace)
    assert en.returncode == 0, en.stderr
    ended, drawn = en.stdout.strip().splitlines()[-2:]
    assert re.fullmatch(r"done · \$\d+\.\d{4} · exit 0", ended), ended
    assert drawn.startswith("the run drawn: flower report")
