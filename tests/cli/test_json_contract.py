"""`--json` as a contract (issue 20, item 4): every command's output, a refusal's included,
is one document that validates against the shipped schema, with stable step ids, ISO-8601
UTC times, rounded numbers and one run id for both CLIs. (The go/status/analyze/resume
documents are validated where their behaviour is tested: tests/cli/test_go.py and others
read every --json output through tests.json_contract.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flower.cli.contract import SCHEMA_VERSION, error_fix, error_kind, schema
from flower.core import lang
from flower.core.runlock import RunBusyError, holding_the_run
from flower.errors import CredentialsError, WorkspaceError
from flower.testing import FakeAPI, sequence, text, tool
from tests.cli.conftest import FLOWER, flower, offline_env
from tests.json_contract import parse_document

FLOWERBOX = [sys.executable, "-c", "from flowerbox.cli import main; main()"]
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
NOISY_FLOAT = re.compile(r"\d\.\d{7,}")  # 0.018335999999999998


def _keys_and_values(value: object, key: str = "") -> list[tuple[str, object]]:
    if isinstance(value, dict):
        return [kv for k, v in value.items() for kv in _keys_and_values(v, str(k))]
    if isinstance(value, list):
        return [kv for v in value for kv in _keys_and_values(v, key)]
    return [(key, value)]


def test_once_and_run_write_the_same_run_document(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    env = offline_env(fake_api, claude_home)
    fake_api.script = sequence(
        tool("Write", {"file_path": str(workspace / "a.md"), "content": "a\n"}), text("wrote a.md")
    )
    once = flower("once", "write a.md", "--json", "-w", str(workspace), env=env, cwd=workspace)
    assert once.returncode == 0, once.stderr
    document = parse_document(once.stdout)  # stdout holds the document and nothing else
    assert (document["command"], document["status"], document["exit_code"]) == (
        "flower once",
        "done",
        0,
    )
    [step] = document["steps"]
    assert step["step"] == "once" and step["run_id"] == document["run_id"]
    assert step["cost_usd"] == document["cost_usd"] > 0
    times = [v for k, v in _keys_and_values(document) if k.endswith("_at") and v is not None]
    assert times and all(ISO_UTC.match(str(t)) for t in times)
    assert not NOISY_FLOAT.search(once.stdout)

    (workspace / "flow.py").write_text(
        "from flower import AgentSpec, Step, Workflow\n"
        "workflow = Workflow([Step('write', AgentSpec('w', 'Write what you are asked.',"
        " allowed_tools=['Write'], permission_mode='acceptEdits'), 'write b.md')])\n"
    )
    fake_api.script = sequence(
        tool("Write", {"file_path": str(workspace / "b.md"), "content": "b\n"}), text("wrote b.md")
    )
    ran = flower("run", "flow.py", "--json", "--timeout", "0", env=env, cwd=workspace)
    assert ran.returncode == 0, ran.stderr
    document = parse_document(ran.stdout)
    assert document["command"] == "flower run" and document["status"] == "done"
    assert [s["step"] for s in document["steps"]] == ["write"]
    for done in (once, ran):  # issue 36: a CI log (stderr) ends with the outcome line too
        last = [line for line in done.stderr.splitlines() if line.strip()][-2:]
        assert last[0].startswith("完成 · $") and last[0].endswith("· 退出码 0"), done.stderr
        assert last[1].startswith("运行图:flower report")


@pytest.mark.parametrize(
    ("argv", "command", "kind"),
    [
        (["some ask", "--timout", "0", "--json"], "flower go", "usage"),  # a typo'd option
        (["status", "nowhere", "--json"], "flower status", "run_dir"),
        (["analyze", "nowhere", "--json"], "flower analyze", "run_dir"),
        (["once", "x", "--json", "--budget", "nan?"], "flower once", "usage"),
    ],
)
def test_a_refusal_is_one_error_document_and_exit_2(
    tmp_path: Path, argv: list[str], command: str, kind: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    done = subprocess.run(
        [*FLOWER, *argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    document = parse_document(done.stdout)
    assert document["command"] == command and document["exit_code"] == 2
    assert document["error"]["kind"] == kind
    assert document["error"]["message"] and is_sentence(document["error"]["fix"])
    assert document["error"]["message"] in done.stderr.replace("\n", " ") or kind == "usage"


def test_missing_credentials_with_json_is_an_error_document(
    tmp_path: Path, claude_home: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env |= {"HOME": str(claude_home), "XDG_CONFIG_HOME": str(claude_home / ".config")}
    done = subprocess.run(
        [*FLOWER, "an ask", "--timeout", "0", "--json", "-w", str(tmp_path)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    error = parse_document(done.stdout)["error"]
    assert error["kind"] == "credentials" and "flower setup" in error["message"]


def test_a_busy_run_directory_with_json_says_what_to_do(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    runs = workspace / "runs"
    with holding_the_run(runs, ["flower", "go", "first"]):
        done = flower(
            "second", "--timeout", "0", "--json", "-w", str(workspace),
            env=offline_env(fake_api, claude_home), cwd=workspace,
        )  # fmt: skip
    assert done.returncode == 2
    error = parse_document(done.stdout)["error"]
    assert error["kind"] == "run_busy" and "flower status" in error["fix"]
    assert fake_api.requests == []  # refused before anything was paid for


def test_flowerbox_ps_and_its_refusals_are_documents(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    listed = subprocess.run(
        [*FLOWERBOX, "ps", "--json"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    assert parse_document(listed.stdout) == {
        "schema_version": SCHEMA_VERSION,
        "command": "flowerbox ps",
        "error": None,
        "runs": [],
    }
    refused = subprocess.run(
        [*FLOWERBOX, "ps", "--json", "--all", "--bogus"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    document = parse_document(refused.stdout)
    assert document["command"] == "flowerbox ps" and document["error"]["kind"] == "usage"


def test_the_run_id_flowerbox_gives_is_the_one_flower_runs_under(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    """flowerbox sets FLOWER_RUN_ID in the box (flowerbox.box.spec.agent_env); flower's
    documents, manifest rows and events then carry that id, so `flowerbox logs ID` takes
    what `flower ... --json` printed. (On the engine: tests/docker/test_box.py.)"""
    given = "20261201-120000-abc123"
    env = offline_env(fake_api, claude_home) | {"FLOWER_RUN_ID": given}
    fake_api.script = sequence(text("nothing to do"))
    done = flower("once", "say hi", "--json", "-w", str(workspace), env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert parse_document(done.stdout)["run_id"] == given
    rows = json.loads((workspace / "runs" / "manifest.json").read_text())
    assert {row["run"] for row in rows} == {given}
    forged = offline_env(fake_api, claude_home) | {"FLOWER_RUN_ID": "../../etc"}
    fake_api.script = sequence(text("nothing to do"))
    again = flower("once", "say hi", "--json", "-w", str(workspace), env=forged, cwd=workspace)
    assert parse_document(again.stdout)["run_id"] not in (given, "../../etc")  # a new one


def test_every_refusal_kind_has_a_name_and_a_fix() -> None:
    busy = RunBusyError(Path("runs"), {"pid": "1", "command": ["flower"]})
    assert error_kind(busy) == "run_busy" and "flower status" in error_fix(busy)
    missing = CredentialsError("No credentials: ...", lang.text("fix.credentials"))
    assert error_kind(missing) == "credentials" and "`flower setup`" in error_fix(missing)
    # An error with no fix of its own: the advice after its message's last colon.
    workspace = WorkspaceError(Path("x"), "workspace x is not a folder: create it or pass -w")
    assert error_kind(workspace) == "workspace" and error_fix(workspace) == "create it or pass -w"


def test_the_schema_is_in_the_docs_as_shipped() -> None:
    page = (Path(__file__).parents[2] / "docs" / "json.md").read_text()
    block = page.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(block) == schema()


def is_sentence(fix: str) -> bool:
    """A whole sentence (issue 36: a fix was the fragment `--timeout)`): a capital or a
    command first (or Chinese, the suite's language), a full stop last (a Chinese one after
    Chinese), no bracket or backtick left open."""
    chinese = any("\u4e00" <= char <= "\u9fff" for char in fix)
    starts = "\u4e00" <= fix[:1] <= "\u9fff" or fix[:1].isupper() or fix.startswith(("`", "--"))
    pairs = fix.count("(") == fix.count(")") and fix.count("（") == fix.count("）")
    return (
        starts
        and fix.endswith(("。" if chinese else ".", "."))
        and pairs
        and fix.count("`") % 2 == 0
    )


@pytest.mark.english  # the English fallback fix
@pytest.mark.parametrize(
    ("message", "fix"),
    [
        (
            "no answer for q1 (pass one with: --timeout)",
            "Run the command with --help to see what it takes.",
        ),
        ("run busy: see `flower status: the run`", "See `flower status: the run`."),
        ("cannot create x (denied): make it writable", "Make it writable."),
        ("bad: a: b", "B."),
    ],
)
def test_a_fix_is_a_whole_sentence_never_a_fragment(message: str, fix: str) -> None:
    from flower.cli.contract import error_fix, failure

    document = failure("flower go", "usage", message, error_fix(ValueError(message)), 2)
    assert document["error"]["fix"] == fix and is_sentence(fix)
