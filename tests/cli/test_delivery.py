"""The work delivered (issue 20, item 3): an isolated run stacks its workers' rounds on one
branch, leaves the checkout alone, cleans its worktrees, and says where the work is and how
to apply it; `--finish merge` and `--finish patch` do what they say."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from flower.testing import (
    FakeAPI,
    Reply,
    Request,
    When,
    rules,
    sequence,
    starter_cast,
    text,
    tool,
    working_directory,
)
from tests.cli.conftest import flower

ASK = "写 calc.py,add(a, b) 返回两数之和"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def calc_worker(request: Request) -> Reply:
    """Look at calc.py, then write it: buggy when there is none yet (round 1), fixed when
    there is (round 2 must start from round 1's file), then report."""
    me = request.agent_id
    looked = request.result_for(f"toolu_look_{me}")
    if looked is None:
        return tool(
            "Bash", {"command": "cat calc.py 2>/dev/null || echo NO-CALC"}, id=f"toolu_look_{me}"
        )
    if request.result_for(f"toolu_write_{me}") is None:
        content = BUGGY if "NO-CALC" in looked.text else FIXED
        path = f"{working_directory(request)}/calc.py"
        return tool("Write", {"file_path": path, "content": content}, id=f"toolu_write_{me}")
    return text("calc.py 写好了")


def repo(path: Path) -> str:
    """A git repository with one commit at `path`; its HEAD."""
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("calc\n")
    git(path, "add", "README.md")
    git(path, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-q", "-m", "start")
    return git(path, "rev-parse", "HEAD")


def git(path: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def run_isolated(
    api: FakeAPI, env: dict[str, str], ws: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    api.script = starter_cast(verdict=["未达成", "达成"], ask_human=False, worker=calc_worker)
    return flower(
        ASK, "--isolate", "--timeout", "0", *options, "-w", str(ws), env=env, cwd=ws.parent
    )


def untouched(ws: Path, head: str) -> None:
    """The checkout as it was, and nothing of the run left in git."""
    assert git(ws, "rev-parse", "HEAD") == head and git(ws, "status", "--porcelain") == ""
    assert not (ws / "calc.py").exists() and not (ws / ".claude").exists()
    assert git(ws, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_two_isolated_rounds_stack_on_one_branch_and_the_checkout_is_untouched(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    head = repo(workspace)
    done = run_isolated(fake_api, cli_env, workspace, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    branch = f"flower/{summary['run_id']}"
    # Round 2's worker started from round 1's buggy file, in a worktree of its own.
    looks = {
        q.agent_id: found.text.strip()
        for q in fake_api.subagent_requests()
        if (found := q.result_for(f"toolu_look_{q.agent_id}")) is not None
    }
    assert list(looks.values()) == ["NO-CALC", BUGGY.strip()]
    assert git(workspace, "show", f"{branch}:calc.py") + "\n" == FIXED
    commits = git(workspace, "rev-list", "--reverse", f"{head}..{branch}").split()
    assert len(commits) == 2 and git(workspace, "rev-parse", f"{commits[1]}^") == commits[0]
    assert git(workspace, "show", f"{commits[0]}:calc.py") + "\n" == BUGGY
    untouched(workspace, head)
    assert git(workspace, "for-each-ref", "--format=%(refname:short)", "refs/heads") == (
        f"{branch}\nmain"
    )
    assert summary["delivery"] == {
        "branch": branch,
        "base": head,
        "commits": [
            {"sha": sha, "subject": git(workspace, "log", "-1", "--format=%s", sha)}
            for sha in commits
        ],
        "files": ["calc.py"],
        "apply": f"git -C {workspace} merge {branch}",
        "finish": "branch",
        "patch": None,
        "notes": [],
    }
    assert summary["delivery"]["commits"][0]["subject"].startswith("coder ")
    # Each judge was shown where the branch's work is checked out: not in the checkout.
    review = workspace.parent / "runs" / "worktrees" / "review"
    judged = [q.prompt for q in fake_api.main_requests() if "<本轮汇报>" in q.prompt]
    assert len(judged) == 2 and all(f"{branch} 上" in p and str(review) in p for p in judged)


def test_finish_merge_brings_the_work_into_the_checkout_and_says_so(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    head = repo(workspace)
    done = run_isolated(fake_api, cli_env, workspace, "--finish", "merge")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    said, ended = lines[-3:-1]  # the run drawn is the very last line
    assert said.startswith("工作成果已从分支 flower/") and "合并进你的检出" in said  # zh
    assert "的 2 个提交，" in said and said.endswith("1 个文件：calc.py")
    assert ended.startswith("达成 · $")  # the suite's language (zh)
    assert (workspace / "calc.py").read_text() == FIXED
    assert git(workspace, "rev-list", "--count", f"{head}..HEAD") == "2"
    assert git(workspace, "status", "--porcelain") == ""


def test_finish_patch_writes_a_patch_that_applies_to_the_untouched_checkout(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    head = repo(workspace)
    done = run_isolated(fake_api, cli_env, workspace, "--finish", "patch", "--json")
    assert done.returncode == 0, done.stderr
    delivery = json.loads(done.stdout)["delivery"]
    patch = workspace.parent / "runs" / "patches" / f"{delivery['branch'][7:]}.patch"
    assert delivery["finish"] == "patch" and delivery["patch"] == str(patch)
    assert delivery["apply"] == f"git -C {workspace} apply {patch}"
    untouched(workspace, head)
    subprocess.run(delivery["apply"].split(), check=True)
    assert (workspace / "calc.py").read_text() == FIXED


def test_a_first_run_keeps_its_run_folder_out_of_git_status(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    head = repo(workspace)
    runs = workspace / "runs"
    done = run_isolated(fake_api, cli_env, workspace, "--run-dir", str(runs))
    assert done.returncode == 0, done.stderr
    exclude = workspace / ".git" / "info" / "exclude"
    assert f"已把 /runs/ 加进 {exclude}" in done.stdout and "/runs/\n" in exclude.read_text()  # zh
    untouched(workspace, head)  # runs/ is there, and git does not show it


@pytest.mark.english  # the refusals' English words
@pytest.mark.parametrize(
    ("options", "said"),
    [(["--finish", "merge"], "for isolated runs"), (["--isolate", "--finish", "x"], "one of")],
)
def test_a_finish_that_cannot_be_done_is_refused_before_anything_runs(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, options: list[str], said: str
) -> None:
    repo(workspace)
    done = flower(ASK, *options, "-w", str(workspace), env=cli_env, cwd=workspace.parent)
    assert done.returncode == 2 and said in done.stderr
    assert fake_api.requests == []


WORKFLOW = """
from flower import Step, Workflow, coordinator, worker

coder = worker("writes code", "You are the coder.", isolate=True)
workflow = Workflow([Step("work", coordinator("boss", "", {"coder": coder}), "write calc.py")])
"""


@pytest.mark.english
def test_a_workflow_of_your_own_with_isolated_workers_is_delivered_too(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    head = repo(workspace)
    flow = workspace.parent / "flow.py"
    flow.write_text(WORKFLOW)
    delegate = tool(
        "Agent",
        {
            "description": "d",
            "prompt": "calc.py",
            "subagent_type": "coder",
            "run_in_background": False,
        },
        id="toolu_delegate",
    )
    fake_api.script = rules(
        (When(kind="subagent"), calc_worker),
        (When(kind="main"), sequence(delegate, text("delegated"))),
    )
    done = flower(
        "run", str(flow), "--timeout", "0", "-w", str(workspace), env=cli_env, cwd=workspace.parent
    )
    assert done.returncode == 0, done.stderr
    [said] = [line for line in done.stdout.splitlines() if line.startswith("the work is on")]
    branch = said.split()[5].rstrip(":")
    assert git(workspace, "show", f"{branch}:calc.py") + "\n" == BUGGY
    untouched(workspace, head)
