"""Issue 36 item 5, the rest of flower's and flowerbox's command lines: the refusals of
flower/ and flowerbox/cli/ (option checks, state files, the session store, setup, cluster
options), click's `Usage:` line and its words about a value, and the lines that say where
an isolated run's work was delivered, driven on the real CLIs in Chinese and, with
`--lang en`, in the English they always said."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flower.testing import Always, FakeAPI, Rule, Rules, When, starter_cast, text
from tests.cli.conftest import FLOWER, flower
from tests.cli.test_delivery import ASK, calc_worker, repo
from tests.cli.test_lang_cli import CJK, FLOWERBOX, run, speaking


def both(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[str, str]:
    """The stderr of `argv` under zh and under `--lang en`, each asserted to exit 2."""
    zh = run(argv, speaking(env, "zh"), cwd)
    en = run([*argv, "--lang", "en"], speaking(env, "zh"), cwd)
    assert zh.returncode == 2 and en.returncode == 2, zh.stderr + en.stderr
    assert "Traceback" not in zh.stderr + en.stderr
    return zh.stderr, en.stderr


def test_click_s_usage_line_and_its_words_about_a_value_follow_the_language(
    workspace: Path,
) -> None:
    zh, en = both([*FLOWER, "go", "hi", "--rounds", "abc"], dict(os.environ), workspace)
    assert (
        "用法：python -m flower.cli go" in zh and "'--rounds' 的值无效：'abc' 不是有效的整数" in zh
    )
    assert "Usage:" not in zh and "Input should" not in zh
    assert "Usage: python -m flower.cli go" in en and "Input should be a valid integer" in en
    assert not CJK.search(en)
    zh, en = both([*FLOWER, "go", "hi", "--rounds", "0"], dict(os.environ), workspace)
    assert "应大于或等于 1" in zh and "greater than or equal to 1" in en
    zh, en = both([*FLOWERBOX, "ps", "--on", "bogus"], dict(os.environ), workspace)
    assert "用法：python -m flowerbox ps" in zh and "'bogus' 不是 'local', 'kube' 之一。" in zh
    assert "Usage: python -m flowerbox ps" in en and "'bogus' is not one of 'local', 'kube'." in en
    zh, en = both([*FLOWERBOX, "ps", "--json=x"], dict(os.environ), workspace)
    assert "选项 '--json' 不接受值。" in zh and "Option '--json' does not take a value." in en
    helped = run([*FLOWER, "go", "--help"], speaking(dict(os.environ), "zh"), workspace)
    assert helped.returncode == 0 and "用法：python -m flower.cli go" in helped.stdout
    assert "Usage:" not in helped.stdout


def test_an_english_line_after_a_chinese_one_in_one_process_says_usage() -> None:
    """The usage words are put back: the CLI's trees live as long as the process."""
    from flower.cli.app import app  # lazy: the whole command tree, this test's alone

    runner = CliRunner()
    zh = runner.invoke(app, ["go", "hi", "--rounds", "abc", "--lang", "zh"])
    en = runner.invoke(app, ["go", "hi", "--rounds", "abc", "--lang", "en"])
    assert zh.exit_code == en.exit_code == 2
    assert "用法：" in zh.output and "Usage: flower go" in en.output
    assert "用法" not in en.output and "Input should be a valid integer" in en.output


def test_flower_s_own_refusals_follow_the_language(workspace: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NOPE_KEY"}
    zh, en = both([*FLOWER, "setup", "--key-from-env", "NOPE_KEY"], env, workspace)
    assert "--key-from-env NOPE_KEY：这个环境变量未设置或为空" in zh
    assert "--key-from-env NOPE_KEY: that environment variable is unset or empty" in en
    zh, en = both([*FLOWER, "analyze", str(workspace)], env, workspace)
    assert "里既没有 sessions.db 也没有 manifest.json：什么都没运行过" in zh
    assert "holds neither sessions.db nor manifest.json: nothing ran" in en
    as_json = run([*FLOWER, "analyze", str(workspace), "--json"], speaking(env, "zh"), workspace)
    assert json.loads(as_json.stdout)["error"]["fix"] == "什么都没运行过。"


def test_flowerbox_s_command_line_refusals_follow_the_language(workspace: Path) -> None:
    env = dict(os.environ)
    zh, en = both([*FLOWERBOX, "ps", "--namespace", "x", "-w", str(workspace)], env, workspace)
    assert "--namespace 是给集群用的：请加上 --on kube，或去掉它" in zh
    assert "--namespace is for a cluster: add --on kube, or leave it out" in en
    zh, en = both([*FLOWERBOX, "rm", "abc"], env, workspace)
    assert "flowerbox rm 是给集群上的运行用的（--on kube）" in zh
    assert "flowerbox rm is for a run on a cluster (--on kube): a run here is its records" in en
    zh, en = both([*FLOWERBOX, "go", "x", "--timeout", "-5"], env, workspace)  # flower's line
    assert "flower go 会拒绝这个：'--timeout' 的值无效：应大于或等于 0" in zh
    assert "flower go would refuse this: Invalid value for '--timeout': Input should be" in en
    zh, en = both([*FLOWERBOX, "selftest", "--weaken", "x", "--negative-control"], env, workspace)
    assert "--weaken 和 --negative-control：只能给其中一个" in zh
    assert "--weaken and --negative-control: pass one of them" in en


def test_a_corrupt_manifest_and_a_foreign_database_are_refused_in_the_language(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    runs = workspace.parent / "runs"
    runs.mkdir()
    (runs / "manifest.json").write_text('{"a": 1}')
    zh, en = both([*FLOWER, "once", "hi", "-w", str(workspace)], cli_env, workspace.parent)
    assert "manifest.json 里是一个 JSON dict，不是行的列表；它没有被改动：把它移开后重新运行" in zh
    assert "manifest.json holds a JSON dict, not a list of rows; it was left untouched" in en
    (runs / "manifest.json").unlink()
    (runs / "sessions.db").write_bytes(b"not a database at all\n" * 100)
    zh, en = both([*FLOWER, "once", "hi", "-w", str(workspace)], cli_env, workspace.parent)
    assert "sessions.db：不是 SQLite 数据库（" in zh and "请把它移开，或给出另一个 run_dir。" in zh
    assert "sessions.db: is not a SQLite database (" in en
    assert en.rstrip().endswith("Move it aside or pass another run_dir.")
    assert fake_api.requests == []


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_where_the_work_was_delivered_is_said_in_the_language(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, lang: str
) -> None:
    repo(workspace)
    fake_api.script = starter_cast(verdict=["未达成", "达成"], ask_human=False, worker=calc_worker)
    args = (ASK, "--isolate", "--timeout", "0", "-w", str(workspace), "--lang", lang)
    done = flower(*args, env=speaking(cli_env, "zh"), cwd=workspace.parent)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    said = next(line for line in lines if line.endswith(": calc.py") or line.endswith("：calc.py"))
    applied = next(line for line in lines if "git -C" in line)
    if lang == "zh":
        assert said.startswith("工作成果在分支 flower/") and "个提交，1 个文件：calc.py" in said
        assert applied.startswith("  应用它：git -C ")
    else:
        assert said.startswith("the work is on branch flower/") and "1 file(s): calc.py" in said
        assert applied.startswith("  apply it: git -C ")


def test_the_fake_api_s_script_errors_follow_the_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """flower.testing's refusals, on the real server: a request no rule answers."""
    body = {"model": "claude-opus-5-5", "messages": [{"role": "user", "content": "hi"}]}
    for lang, said in (
        ("zh", "没有规则匹配请求 #0（kind=main"),
        ("en", "no rule matched request #0"),
    ):
        monkeypatch.setenv("FLOWER_LANG", lang)
        with FakeAPI(Rules([Rule(When(kind="subagent"), Always(text("x")))])) as api:
            request = urllib.request.Request(
                api.url + "/v1/messages",
                data=json.dumps({**body, "stream": False}).encode(),
                headers={"content-type": "application/json"},
                method="POST",
            )
            with contextlib.suppress(OSError):  # the script error is an error answer
                urllib.request.urlopen(request, timeout=10).close()
            assert any(said in error for error in api.errors), api.errors
