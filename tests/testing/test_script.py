"""Scripts and the declarative loader, as plain functions of a Request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flower.testing import (
    Always,
    Request,
    Rule,
    Rules,
    ScriptError,
    ScriptFileError,
    Sequence,
    When,
    http_error,
    load_script,
    text,
    tool,
)
from flower.testing.replies import ToolUse


def req(
    *messages: dict[str, Any],
    system: str = "billing; cc_entrypoint=sdk-py;",
    headers: dict[str, str] | None = None,
) -> Request:
    body = {"system": [{"type": "text", "text": system}], "messages": list(messages)}
    return Request(0, "/v1/messages?beta=true", headers or {}, body, 10)


def user(*blocks: dict[str, Any] | str) -> dict[str, Any]:
    return {"role": "user", "content": [_block(b) for b in blocks]}


def assistant(*blocks: dict[str, Any] | str) -> dict[str, Any]:
    return {"role": "assistant", "content": [_block(b) for b in blocks]}


def _block(b: dict[str, Any] | str) -> dict[str, Any]:
    return {"type": "text", "text": b} if isinstance(b, str) else b


def use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}


def result(tool_id: str, content: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def test_sequence_position_follows_the_conversation_not_the_last_message() -> None:
    first = tool("Bash", {"command": "ls"}, id="toolu_a")
    seq = Sequence([first, text("second"), text("third")])
    assert seq(req(user("go"))) is first
    # A role "system" message after the tool result must not confuse it.
    after_tool = req(
        user("go"),
        assistant(use("toolu_a")),
        user(result("toolu_a")),
        {"role": "system", "content": "x"},
    )
    assert seq(after_tool).text == "second"
    later = req(user("go"), assistant(use("toolu_a")), user(result("toolu_a")), assistant("second"))
    assert seq(later).text == "third"


def test_a_resent_request_gets_the_same_reply() -> None:
    seq = Sequence([text("one"), text("two")])
    assert seq(req(user("go"))).text == "one"
    assert seq(req(user("go"))).text == "one"


@pytest.mark.english
def test_exhausted_sequence_raises_or_answers_then() -> None:
    done = req(user("go"), assistant("only"))
    with pytest.raises(ScriptError, match="exhausted"):
        Sequence([text("only")])(done)
    assert Sequence([text("only")], then=text("again"))(done).text == "again"


def test_fault_times_runs_out_then_the_reply_is_served() -> None:
    seq = Sequence([text("fine", fault=http_error(529, times=2))])
    faults = [seq(req(user("go"))).fault for _ in range(3)]
    assert [f is not None for f in faults] == [True, True, False]


def test_always_gives_fresh_tool_ids() -> None:
    always = Always(tool("Bash", {"command": "ls"}))
    ids = {b.id for _ in range(3) for b in always(req(user("x"))).blocks if isinstance(b, ToolUse)}
    assert len(ids) == 3


@pytest.mark.parametrize(
    ("when", "request_", "expected"),
    [
        (When(kind="main"), req(user("x")), True),
        (When(kind="subagent"), req(user("x")), False),
        (When(kind="subagent"), req(user("x"), headers={"x-claude-code-agent-id": "a1"}), True),
        (When(kind="subagent"), req(user("x"), system="x; cc_is_subagent=true;"), True),
        (When(system_contains="scribe"), req(user("x"), system="You are the scribe"), True),
        (When(contains="needle"), req(user("hay needle")), True),
        (When(last_user_contains="b"), req(user("a"), assistant("."), user("b")), True),
        (When(last_user_contains="a"), req(user("a"), assistant("."), user("b")), False),
        (When(tool_results=1), req(user("x"), assistant(use("t")), user(result("t"))), True),
        (When(min_tool_results=2), req(user("x"), assistant(use("t")), user(result("t"))), False),
    ],
)
def test_when_conditions(when: When, request_: Request, expected: bool) -> None:
    assert when.matches(request_) is expected


def test_compaction_requests_need_an_explicit_rule() -> None:
    compaction = req(
        user(
            "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools. create a detailed "
            "summary of the conversation so far"
        )
    )
    assert compaction.kind == "compaction"
    script = Rules([Rule(When(), Always(text("main reply")))])
    assert "<summary>" in script(compaction).text
    explicit = Rules([Rule(When(kind="compaction"), Always(text("<summary>mine</summary>")))])
    assert explicit(compaction).text == "<summary>mine</summary>"


@pytest.mark.english
def test_no_matching_rule_names_the_request() -> None:
    script = Rules([Rule(When(kind="subagent"), Always(text("x")))])
    with pytest.raises(ScriptError, match=r"no rule matched request #0 \(kind=main"):
        script(req(user("x")))


def test_request_views() -> None:
    r = req(
        user("go"),
        assistant("thinking aloud", use("t1")),
        user(result("t1", "output one")),
        {"role": "system", "content": "Primary working directory: /w"},
        headers={"x-api-key": "<redacted>"},
    )
    assert [t.text for t in r.last_tool_results()] == ["output one"]
    assert r.result_for("t1") is not None and r.tool_uses()[0]["id"] == "t1"
    assert "Primary working directory: /w" in r.system_text
    assert r.contains("output one") and not r.contains("absent")


# --- the declarative file ---------------------------------------------------------------


def write(tmp_path: Path, name: str, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content)
    return path


def test_yaml_file_round_trip_and_cwd_placeholder(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.yaml",
        """
rules:
  - name: main
    when: {kind: main}
    replies:
      - text: "writing"
        tool_use: {name: Write, input: {file_path: "{cwd}/a.txt", content: "x"}}
        usage: {input_tokens: 500}
      - text: "done"
        fault: {http: 529, times: 1}
""",
    )
    script = load_script(path)
    first = script(req(user("go"), {"role": "system", "content": "Primary working directory: /w"}))
    [call] = [b for b in first.blocks if isinstance(b, ToolUse)]
    assert call.input["file_path"] == "/w/a.txt"
    assert first.usage.input_tokens == 500


def test_json_file_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "s.json", '{"rules": [{"reply": "hello"}]}')
    assert load_script(path)(req(user("x"))).text == "hello"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.json", '{"rules": [\n  {"reply": "x",}\n]}', r"bad\.json:2:\d+: invalid JSON"),
        (
            "bad.yaml",
            "rules:\n  - when: {kind: main\n    reply: x\n",
            r"bad\.yaml:\d+: invalid YAML",
        ),
        (
            "typo.yaml",
            "rules:\n  - reply: ok\n  - name: worker\n    repiles: []\n",
            r"typo\.yaml:3: rule #2 'worker': unknown key 'repiles'",
        ),
        (
            "both.yaml",
            "rules:\n  - reply: a\n    replies: [b]\n",
            r"both\.yaml:2: rule #1: give exactly one",
        ),
        (
            "when.yaml",
            "rules:\n  - when: {who: main}\n    reply: a\n",
            r"rule #1: when: unknown key 'who'",
        ),
        (
            "fault.yaml",
            "rules:\n  - replies:\n      - fault: {http: 500, drop: 1}\n",
            r"rule #1: reply #1: a fault names exactly one of",
        ),
        ("empty.yaml", "rules: []\n", "non-empty list"),
        ("script.txt", "rules: []\n", "unknown script format"),
    ],
)
@pytest.mark.english
def test_malformed_files_name_the_line_or_rule(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    with pytest.raises(ScriptFileError, match=message):
        load_script(write(tmp_path, name, content))


@pytest.mark.english
def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScriptFileError, match="cannot read the script file"):
        load_script(tmp_path / "absent.yaml")


def test_prompt_is_what_the_user_said_without_the_reminders() -> None:
    r = req(
        user("<system-reminder>\nattribution rules\n</system-reminder>", "write the report"),
        assistant("ok"),
        user(result("t", "tool output")),
    )
    assert r.prompt == "write the report"
    assert req(user("<system-reminder>only this</system-reminder>")).prompt == ""


def test_the_working_directory_may_hold_spaces() -> None:
    from flower.testing import working_directory

    r = req(
        user("go"),
        {"role": "system", "content": " - Primary working directory: /w/my project\n - x"},
    )
    assert working_directory(r) == "/w/my project"
