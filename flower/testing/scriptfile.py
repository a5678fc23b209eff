"""Declarative scripts: a JSON or YAML file of rules, for the process mode and for users.

    rules:
      - name: worker                      # optional, used in error messages
        when: {kind: subagent, system_contains: "You write code"}
        replies:                          # a Sequence; or `reply:` for one answer every time
          - tool_use: {name: Write, input: {file_path: "{cwd}/out.txt", content: "hi"}}
          - text: "wrote out.txt"
      - when: {kind: main}
        replies:
          - text: "let me check"
            tool_use: {name: Bash, input: {command: "ls"}}
            usage: {input_tokens: 150000}
          - text: "done"
            fault: {http: 529, times: 2}  # or drop: 0 / reset: true / stream_error: 1 /
                                          # prompt_too_long: true

A reply's keys: text, thinking, tool_use (one mapping or a list), usage, stop_reason, delay,
fault. `{cwd}` in tool inputs becomes the working directory the CLI reports. Every error names
the file and the line (syntax) or the rule and reply (structure).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flower.core.lang import text
from flower.testing.replies import (
    Block,
    Fault,
    Reply,
    Text,
    Thinking,
    ToolUse,
    Usage,
    drop,
    http_error,
    prompt_too_long,
    reset,
    stream_error,
)
from flower.testing.script import Always, Rule, Rules, Script, ScriptFileError, Sequence, When

RULE_KEYS = {"name", "when", "replies", "reply"}
REPLY_KEYS = {"text", "thinking", "tool_use", "usage", "stop_reason", "delay", "fault"}
WHEN_KEYS = set(When.__dataclass_fields__)
USAGE_KEYS = set(Usage.__dataclass_fields__)
FAULT_KINDS = ("http", "drop", "stream_error", "reset", "prompt_too_long")


def load_script(path: str | Path) -> Rules:
    """Read a rules file (.json, .yaml or .yml) into a script."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptFileError(text("script.unreadable", path=path, problem=exc.strerror)) from exc
    data, lines = _parse(path, raw)
    rules = data.get("rules") if isinstance(data, dict) else data
    if not isinstance(rules, list) or not rules:
        raise ScriptFileError(text("script.no_rules", path=path))
    return Rules(
        (_rule(path, number, spec, lines.get(number)) for number, spec in enumerate(rules, 1)),
        placeholders=True,
    )


def _parse(path: Path, raw: str) -> tuple[Any, dict[int, int]]:
    """The parsed document, and the line each rule starts on (YAML only)."""
    if path.suffix == ".json":
        try:
            return json.loads(raw), {}
        except json.JSONDecodeError as exc:
            where = f"{path}:{exc.lineno}:{exc.colno}"
            raise ScriptFileError(text("script.bad_json", where=where, problem=exc.msg)) from exc
    if path.suffix not in (".yaml", ".yml"):
        raise ScriptFileError(text("script.unknown_format", path=path))
    try:
        import yaml  # lazy: PyYAML is an optional extra, needed by YAML scripts only
    except ImportError as exc:
        raise ScriptFileError(text("script.no_yaml", path=path)) from exc
    try:
        node = yaml.compose(raw)
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", exc)
        raise ScriptFileError(text("script.bad_yaml", where=where, problem=problem)) from exc
    return data, _rule_lines(node)


def _rule_lines(node: Any) -> dict[int, int]:
    import yaml  # lazy: the optional extra, present once a YAML script got this far

    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if k.value == "rules"), None)
    if not isinstance(node, yaml.SequenceNode):
        return {}
    return {number: item.start_mark.line + 1 for number, item in enumerate(node.value, 1)}


def _rule(path: Path, number: int, spec: Any, line: int | None) -> Rule:
    name = spec.get("name", "") if isinstance(spec, dict) else ""
    where = f"{path}:{line}" if line else str(path)
    label = f"rule #{number}" + (f" '{name}'" if name else "")

    def fail(problem: str) -> ScriptFileError:
        return ScriptFileError(f"{where}: {label}: {problem}")

    if not isinstance(spec, dict):
        raise fail("expected a mapping with 'when' and 'replies' or 'reply'")
    _known(spec, RULE_KEYS, fail)
    when_spec = spec.get("when", {})
    if not isinstance(when_spec, dict):
        raise fail("'when' must be a mapping")
    _known(when_spec, WHEN_KEYS, fail, "when")
    try:
        when = When(**when_spec)
    except TypeError as exc:
        raise fail(f"bad 'when': {exc}") from exc
    if ("replies" in spec) == ("reply" in spec):
        raise fail("give exactly one of 'replies' (a sequence) or 'reply' (always the same)")
    answer: Script
    if "reply" in spec:
        answer = Always(_reply(spec["reply"], fail, "reply"))
    else:
        replies = spec["replies"]
        if not isinstance(replies, list) or not replies:
            raise fail("'replies' must be a non-empty list")
        answer = Sequence(_reply(r, fail, f"reply #{i}") for i, r in enumerate(replies, 1))
    return Rule(when, answer, name=str(name))


def _known(spec: dict[str, Any], allowed: set[str], fail: Any, what: str = "") -> None:
    unknown = sorted(set(spec) - allowed)
    if unknown:
        where = f"{what}: " if what else ""
        expected = ", ".join(sorted(allowed))
        raise fail(f"{where}unknown key '{unknown[0]}' (expected one of {expected})")


def _reply(spec: Any, fail: Any, label: str) -> Reply:
    if isinstance(spec, str):
        return Reply(blocks=(Text(spec),))
    if not isinstance(spec, dict):
        raise fail(f"{label}: expected a mapping or a string")
    _known(spec, REPLY_KEYS, fail, label)
    blocks: list[Block] = []
    if "thinking" in spec:
        blocks.append(Thinking(str(spec["thinking"])))
    if "text" in spec:
        blocks.append(Text(str(spec["text"])))
    calls = spec.get("tool_use", [])
    for call in calls if isinstance(calls, list) else [calls]:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise fail(f"{label}: tool_use needs a 'name' (and an 'input' mapping)")
        extra = {"id": call["id"]} if "id" in call else {}
        blocks.append(ToolUse(call["name"], dict(call.get("input", {})), **extra))
    if not blocks and "fault" not in spec:
        raise fail(f"{label}: needs text, thinking or tool_use (or a fault)")
    usage = spec.get("usage", {})
    if not isinstance(usage, dict):
        raise fail(f"{label}: 'usage' must be a mapping")
    _known(usage, USAGE_KEYS, fail, f"{label} usage")
    return Reply(
        blocks=tuple(blocks),
        usage=Usage(**usage),
        stop_reason=spec.get("stop_reason"),
        delay=float(spec.get("delay", 0.0)),
        fault=_fault(spec["fault"], fail, label) if "fault" in spec else None,
    )


def _fault(spec: Any, fail: Any, label: str) -> Fault:
    if not isinstance(spec, dict):
        raise fail(f"{label}: 'fault' must be a mapping")
    kinds = [k for k in FAULT_KINDS if k in spec]
    if len(kinds) != 1:
        raise fail(f"{label}: a fault names exactly one of {', '.join(FAULT_KINDS)}")
    times = spec.get("times")
    match kinds[0]:
        case "http":
            return http_error(
                int(spec["http"]),
                spec.get("message"),
                retry_after=spec.get("retry_after"),
                times=times,
            )
        case "drop":
            return drop(int(spec["drop"]), times=times)
        case "stream_error":
            return stream_error(int(spec["stream_error"]), times=times)
        case "reset":
            return reset(times=times)
        case _:
            return prompt_too_long(
                int(spec.get("tokens", 1_050_000)), int(spec.get("maximum", 1_000_000)), times=times
            )
