"""A wake's words, kept until they have reached all three places (seed 000, starter_flow).

A wake's new words go to the brief (amended at once), to the goal (set again from the
amended brief by a paid judge step) and to the coordinator (told when its session resumes).
A process stopped between the first and the last of these used to lose the other two: the
next `flower resume`, `flower go --continue` or the same words typed again (which the
ask-history rule treats as no new ask) found a complete brief and the old goal, and the
judge ruled on the old goal. The words therefore stay in `<run_dir>/wake.json` until the
goal was set again from them and the coordinator has ended a round with them; any
continuation before that delivers them again (the brief's amendment is idempotent, a
repeated word to the coordinator is harmless, silence is not).
"""

from __future__ import annotations

from pathlib import Path

from flower.core.statefile import atomic_write_json, read_json

__all__ = ["PendingWake"]


class PendingWake:
    """The wake of the run in `path` (RunDir.wake) whose words are not delivered yet."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def words(self) -> list[str]:
        """The words of the wakes not yet delivered everywhere, oldest first."""
        words = self._read().get("words", [])
        return [str(said) for said in words] if isinstance(words, list) else []

    def goal_set(self) -> bool:
        """Whether the goal was already set again from these words."""
        return self._read().get("goal_set") is True

    def begin(self, said: str) -> None:
        """New words woke the run: the goal must be set again, the coordinator told."""
        self._write({"words": [*self.words(), said], "goal_set": False})

    def goal_done(self) -> None:
        """The goal was set again from the amended brief."""
        if self.path.exists():
            self._write({"words": self.words(), "goal_set": True})

    def delivered(self) -> None:
        """The coordinator has ended a round with the words: nothing is pending any more."""
        self.path.unlink(missing_ok=True)

    def _read(self) -> dict[str, object]:
        found = read_json(self.path, {})
        return found if isinstance(found, dict) else {}

    def _write(self, record: dict[str, object]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, record)
