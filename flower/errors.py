"""flower's errors: one base class, so a caller (the CLI above all) can tell "flower refused
this, and says why" from a bug.

Tree (each class lives beside the code that raises it; the leaves carry their data)::

    FlowerError
    ├── UsageError (ValueError)        a value given to flower cannot be used (flower.errors)
    │   ├── WorkspaceError             `path`: not a folder, or no git repository where
    │   │                              isolated workers need one (flower.errors)
    │   ├── RunDirError                `path`: a file, or a folder that holds no run
    │   │                              (flower.errors)
    │   ├── DotenvError                `path`: a .env file flower was told to read
    │   │                              (flower.core.env)
    │   ├── LangError                  `value`: a language flower does not speak, from
    │   │                              --lang or $FLOWER_LANG (flower.core.lang)
    │   └── RunBusyError               `run_dir`, `holder`: another flower run holds the
    │                                  run directory (flower.core.runlock)
    ├── CredentialsError (RuntimeError) no API key or token anywhere flower looks
    │                                  (flower.errors)
    ├── StateFileError (ValueError)    `path`: a JSON state file (flower.core.statefile)
    │   ├── CorruptStateError          it does not parse; it is left untouched
    │   └── LockTimeoutError           `timeout`, `holder`: its lock stayed held
    ├── UntrustedJSONError (ValueError) box-written JSON too large, too deep or not JSON
    │                                  (flower.core.untrusted)
    ├── WorkbenchError (ValueError)    `path`: the workbench cannot live there
    │                                  (flower.core.workbench)
    ├── StoreError                     `path`, `problem`, `fix`: sessions.db cannot be used
    │                                  (flower.stores)
    ├── GitError                       `said`: git refused flower's own bookkeeping (a
    │                                  worker's commit, the run's branch, a merge)
    │                                  (flower.core.git)
    ├── StepAbort                      a gate says retrying will not help
    │                                  (flower.workflow.base)
    ├── StepFailed                     `step`, `result`: a step with on_fail="raise" did not
    │                                  pass (flower.workflow.base)
    └── ScriptError                    the fake API's script has no reply (flower.testing)
        └── ScriptFileError            a script file is malformed

The second bases keep the seeds' contracts: `Runtime(...)` raises a RuntimeError without
credentials, `starter_flow` a ValueError for a missing ask or a workspace outside git, so
`except ValueError` / `except RuntimeError` around them still works.

A ValueError or TypeError that is not a FlowerError is a mistake in the calling code (a
negative policy number, an unknown on_fail, a session id with a slash): it is raised as it
is, and the CLI lets its traceback through.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CredentialsError", "FlowerError", "RunDirError", "UsageError", "WorkspaceError"]


class FlowerError(Exception):
    """Base of every error flower raises on purpose; its message names the problem and the
    fix. The CLI turns it into that message and exit 2 (flower.cli.exits). `fix`, where a
    class or an instance sets it, is the fix alone, for `--json` documents."""

    fix: str | None = None


class UsageError(FlowerError, ValueError):
    """A value given to flower (an argument, an option, a file's content) cannot be used."""


class WorkspaceError(UsageError):
    """The workspace at `path` cannot be used as it is."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


class RunDirError(UsageError):
    """The run directory at `path` cannot be used (it is a file), or holds no run."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


class CredentialsError(FlowerError, RuntimeError):
    """No credentials: `problem` is check_credentials()'s message (where flower looked, what
    to set); `fix` what to do, in the run's language (flower.core.env gives both)."""

    def __init__(self, problem: str, fix: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
