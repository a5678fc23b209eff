"""Build transcripts shaped like the CLI's: a parentUuid chain, one assistant entry per
content block (blocks of one API response share message.id), tool results in user entries."""

from __future__ import annotations

from typing import Any

Entry = dict[str, Any]


class Chat:
    """Appends entries to ``self.entries``, each chained to the previous one."""

    def __init__(self, session_id: str = "s1") -> None:
        self.session_id = session_id
        self.entries: list[Entry] = []
        self._count = 0
        self._responses = 0

    def add(self, entry: Entry, *, chained: bool = True) -> Entry:
        self._count += 1
        parent = self.entries[-1].get("uuid") if chained and self.entries else None
        entry = {
            "parentUuid": parent,
            "isSidechain": False,
            "uuid": f"e{self._count:05d}",
            "timestamp": f"2026-01-01T00:{self._count // 60 % 60:02d}:{self._count % 60:02d}.000Z",
            "sessionId": self.session_id,
            "cwd": "/ws",
            "version": "2.1.332",
            **entry,
        }
        self.entries.append(entry)
        return entry

    def prompt(self, text: str, **extra: Any) -> Entry:
        return self.add({"type": "user", "message": {"role": "user", "content": text}, **extra})

    def response(self, *blocks: dict[str, Any], **extra: Any) -> list[Entry]:
        """One API response: one assistant entry per block, all with the same message.id."""
        self._responses += 1
        mid = f"msg_{self._responses:05d}"
        usage = {"input_tokens": 10, "output_tokens": 5}
        return [
            self.add(
                {
                    "type": "assistant",
                    "message": {
                        "id": mid,
                        "role": "assistant",
                        "model": "claude-opus-5-5",
                        "content": [block],
                        "usage": usage,
                    },
                    **extra,
                }
            )
            for block in blocks
        ]

    def say(self, text: str = "ok") -> Entry:
        return self.response({"type": "text", "text": text})[0]

    def result(
        self, tool_use_id: str, content: Any, *, is_error: bool = False, **extra: Any
    ) -> Entry:
        block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
        block["is_error"] = is_error
        return self.add({"type": "user", "message": {"role": "user", "content": [block]}, **extra})

    def call(
        self,
        name: str,
        tool_input: dict[str, Any],
        content: Any,
        *,
        is_error: bool = False,
        **extra: Any,
    ) -> tuple[Entry, Entry]:
        """A response with one tool_use, then its result."""
        tid = f"toolu_{self._count + 1:05d}"
        (use,) = self.response({"type": "tool_use", "id": tid, "name": name, "input": tool_input})
        return use, self.result(tid, content, is_error=is_error, **extra)

    def bash(self, command: str, output: Any, **kw: Any) -> tuple[Entry, Entry]:
        return self.call("Bash", {"command": command}, output, **kw)

    def deny(self, command: str, reason: str = "Delegate this to a worker.") -> tuple[Entry, Entry]:
        return self.bash(command, f"PreToolUse:Bash hook error: {reason}", is_error=True)

    def api_error(self) -> list[Entry]:
        system = self.add(
            {"type": "system", "subtype": "api_error", "error": {"status": 500}, "retryAttempt": 1}
        )
        synthetic = self.add(
            {
                "type": "assistant",
                "isApiErrorMessage": True,
                "error": "server_error",
                "message": {
                    "id": f"synthetic-{self._count}",
                    "role": "assistant",
                    "model": "<synthetic>",
                    "content": [{"type": "text", "text": "API Error: 500 Internal server error"}],
                },
            }
        )
        return [system, synthetic]

    def orphan(self, *names: str) -> list[Entry]:
        """A response whose tool calls never got results (the process died)."""
        base = self._count
        return self.response(
            *(
                {"type": "tool_use", "id": f"toolu_o{base}_{n}", "name": name, "input": {}}
                for n, name in enumerate(names)
            )
        )

    def meta(self, text: str) -> Entry:
        return self.add(
            {"type": "user", "isMeta": True, "message": {"role": "user", "content": text}}
        )

    def compact(self, summary: str) -> list[Entry]:
        last = self.entries[-1]["uuid"] if self.entries else None
        boundary = self.add(
            {"type": "system", "subtype": "compact_boundary", "logicalParentUuid": last},
            chained=False,
        )
        return [
            boundary,
            self.prompt(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        ]
