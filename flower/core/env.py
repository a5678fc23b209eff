"""Credentials and settings from the environment and .env files.

flower has no configuration file format: everything is an environment variable, and
`load_dotenv()` fills the gaps in `os.environ` from .env files. Without an explicit path it
reads every existing file of the lookup order below; the first value seen for a key is final,
so the priority is per key, not per file, and nothing overrides the process environment:

1. the process environment (never overwritten);
2. the file named by `$FLOWER_ENV` (only when that variable is set; it must exist);
3. `./.env` in the current directory;
4. `${XDG_CONFIG_HOME:-~/.config}/flower/.env`, the global file `flower setup` writes;
5. the source checkout's `.env`, three levels above this file (running from source only);
6. the `env` block of `~/.claude/settings.json`, then `~/.claude/settings.local.json`, for the
   nine `KNOWN` keys only. Nothing else of Claude Code's settings is borrowed, so the agent
   still runs with `setting_sources=[]`.

An empty value still occupies its key: `ANTHROPIC_AUTH_TOKEN=` in a higher file hides every
lower one, and `check_credentials()` then reports the credentials missing.

Errors: `DotenvError` (a .env file cannot be read, or the file named by `$FLOWER_ENV` or an
explicit path does not exist; a flower.errors.UsageError). A broken settings.json never raises.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from flower.core.lang import text
from flower.errors import CredentialsError, UsageError

__all__ = [
    "KNOWN",
    "DotenvError",
    "Lookup",
    "check_credentials",
    "describe",
    "load_dotenv",
    "parse_dotenv",
    "require_credentials",
    "source_root",
]

KNOWN: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
    "CLAUDE_CODE_EFFORT_LEVEL",
)
"""The credential and model keys: what is borrowed from ~/.claude and what describe() shows."""

CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
_SECRET_PREFIX = 4
_PROCESS = "process environment"
_EXPORT = re.compile(r"^export\s+")  # a shell's `export KEY=...` line
_COMMENT = re.compile(r"\s+#")  # an inline comment begins at a `#` after whitespace

# key -> (origin, value as loaded), for every key a load_dotenv() call set in this process.
# A key in os.environ without an entry here came from the process environment.
_loaded: dict[str, tuple[str, str]] = {}


class DotenvError(UsageError):
    """A .env file flower was told to read cannot be read; `path` names it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path


def parse_dotenv(text: str) -> dict[str, str]:
    """Parse .env text with the seeds' deliberately small rules.

    Each line is stripped; empty lines, lines starting with `#` and lines without `=` are
    skipped. A shell's `export ` prefix is dropped. The rest is split at the first `=`, both
    sides are stripped, an inline comment (a `#` after whitespace, outside the quotes) is
    dropped, and the value loses any leading and trailing quotes (`'` or `"`, paired or not).
    Every key is kept, there is no whitelist. A key repeated in the text keeps its first value,
    as across files: a line appended to a .env never replaces the credentials or the endpoint
    above it. Not recognised, silently: escapes, multi-line values, interpolation. A line with
    nothing before `=` is skipped, since the environment cannot hold an empty name.
    """
    values: dict[str, str] = {}
    for entry in filter(None, map(dotenv_entry, text.splitlines())):
        values.setdefault(*entry)
    return values


def dotenv_entry(line: str) -> tuple[str, str] | None:
    """The (key, value) one .env line sets by parse_dotenv's rules, or None for a comment,
    a blank or junk: `flower setup` finds the line to replace with it."""
    line = _EXPORT.sub("", line.strip(), count=1)
    if not line or line.startswith("#") or "=" not in line:
        return None
    key, _, value = line.partition("=")
    key = key.strip()
    return (key, _uncommented(value).strip().strip("'\"")) if key else None


def _uncommented(value: str) -> str:
    """`value` without its inline comment: a `#` after whitespace, as a shell reads it;
    one inside quotes (`"a # b"`) belongs to the value."""
    quote = value.lstrip()[:1]
    if quote in ("'", '"'):
        end = value.rfind(quote)
        closed = end > value.index(quote)
        return value[: end + 1] if closed and _COMMENT.match(value[end + 1 :]) else value
    return _COMMENT.split(value, maxsplit=1)[0]


def source_root(module_file: Path | None = None) -> Path | None:
    """The source checkout that holds this module, or None for an installed flower.

    "From source" means the directory three levels above env.py holds a pyproject.toml and is
    not a site-packages (or dist-packages) directory: an sdist or a git checkout qualifies, a
    wheel installed by pip, pipx or uv does not.
    """
    root = (module_file or Path(__file__)).resolve().parents[2]
    if root.name in ("site-packages", "dist-packages") or not (root / "pyproject.toml").is_file():
        return None
    return root


@dataclass(frozen=True, kw_only=True)
class Lookup:
    """Where the automatic lookup reads; `from_process()` builds it from this process.

    Tests build one by hand so they never touch the real home or checkout.
    """

    cwd: Path
    home: Path
    config_home: Path
    flower_env: Path | None = None
    source: Path | None = None
    project: bool = True  # read ./.env and the source checkout's .env (entries 3 and 5)

    @classmethod
    def from_process(cls, *, project: bool = True) -> Lookup:
        """Read $HOME, $XDG_CONFIG_HOME and $FLOWER_ENV now (empty counts as unset).

        `project=False` leaves out the files a project folder holds (./.env, the source
        checkout's .env): flowerbox on the host never configures itself from a folder a box
        can write."""
        home = Path.home()
        cwd = Path.cwd()
        flower_env = os.environ.get("FLOWER_ENV")
        return cls(
            cwd=cwd,
            home=home,
            config_home=_config_home(home),
            flower_env=cwd / Path(flower_env).expanduser() if flower_env else None,
            source=source_root(),
            project=project,
        )

    @property
    def global_dotenv(self) -> Path:
        return self.config_home / "flower" / ".env"

    def dotenv_files(self) -> Iterator[tuple[str, Path]]:
        """Entries 2-5 of the lookup order as (origin label, path), existing or not."""
        if self.flower_env is not None:
            yield "$FLOWER_ENV", self.flower_env
        if self.project:
            yield "./.env", self.cwd / ".env"
        yield "global .env", self.global_dotenv
        if self.source is not None and self.project:
            yield "source .env", self.source / ".env"

    def claude_settings(self) -> Iterator[tuple[str, Path]]:
        """Entry 6: Claude Code's settings files, in the order they are read."""
        for name in ("settings.json", "settings.local.json"):
            yield f"~/.claude/{name}", self.home / ".claude" / name


def _config_home(home: Path) -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else home / ".config"


def _read_dotenv(path: Path) -> dict[str, str]:
    try:
        return parse_dotenv(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DotenvError(
            path,
            text("error.dotenv_unreadable", problem=exc),
        ) from exc


def _claude_env(path: Path) -> dict[str, str]:
    """The KNOWN string values of the file's `env` block; {} for anything unexpected.

    A fallback must never break a run: a missing, unreadable or non-JSON file, a non-dict
    `env` and non-string values are all ignored.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    env = data.get("env") if isinstance(data, dict) else None
    if not isinstance(env, dict):
        return {}
    return {k: v for k, v in env.items() if k in KNOWN and isinstance(v, str)}


def _sources(
    path: str | Path | None, lookup: Lookup | None
) -> Iterator[tuple[str, dict[str, str]]]:
    """(origin label, values) for each place read, highest priority first."""
    if path is not None:
        # An explicit file is the whole lookup: no fallback, no settings.json.
        explicit = Path(path)
        if not explicit.is_file():
            raise DotenvError(explicit, text("error.dotenv_missing"))
        yield f"explicit {explicit}", _read_dotenv(explicit)
        return
    lookup = lookup or Lookup.from_process()
    if lookup.flower_env is not None and not lookup.flower_env.is_file():
        # Named on purpose: falling back to other files could pick other credentials.
        raise DotenvError(lookup.flower_env, text("error.dotenv_flower_env"))
    for label, file in lookup.dotenv_files():
        if file.is_file():
            yield f"{label} {file}", _read_dotenv(file)
    for label, file in lookup.claude_settings():
        yield f"{label} {file}", _claude_env(file)


def load_dotenv(path: str | Path | None = None, *, lookup: Lookup | None = None) -> dict[str, str]:
    """Fill the gaps of `os.environ` from .env files; return {key: origin} for the keys set.

    With `path`, only that file is read (it must exist). Without it, the lookup order of the
    module docstring applies, from `lookup` or from this process. A key already in
    `os.environ`, even with an empty value, is never overwritten.

    Raises:
        DotenvError: a .env file exists but cannot be read, or `path` (or `$FLOWER_ENV`)
            names no file.
    """
    set_now: dict[str, str] = {}
    for origin, values in _sources(path, lookup):
        for key, value in values.items():
            if key in os.environ:
                continue
            os.environ[key] = value
            _loaded[key] = (origin, value)
            set_now[key] = origin
    return set_now


def check_credentials() -> str | None:
    """None when ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is set and non-empty.

    Otherwise the four-line message that says where credentials go (Runtime raises it).
    """
    if any(os.environ.get(key) for key in CREDENTIALS):
        return None
    global_dotenv = _config_home(Path.home()) / "flower" / ".env"
    return text("error.no_credentials", path=global_dotenv)


def require_credentials() -> None:
    """Load the .env files; CredentialsError (check_credentials' message) when no key is
    set. Callers run it before they create anything, so a failed start leaves nothing."""
    load_dotenv()
    if problem := check_credentials():
        raise CredentialsError(problem, text("fix.credentials"))


def _shown(key: str, value: str) -> str:
    if not value:
        return "'' (empty, counts as unset)"
    if key not in CREDENTIALS:
        return value
    # A short secret would be half revealed by a 4-character prefix: show its length only.
    prefix = value[:_SECRET_PREFIX] if len(value) >= 4 * _SECRET_PREFIX else ""
    return f"{prefix}... ({len(value)} chars)"


def describe() -> str:
    """One line per KNOWN key: its value (secrets masked) and where it came from.

    The origin is the file load_dotenv() took it from, the process environment, or "unset".
    Secret values show at most a 4-character prefix and their length.
    """
    lines = []
    width = max(map(len, KNOWN))
    for key in KNOWN:
        value = os.environ.get(key)
        if value is None:
            lines.append(f"{key:<{width}}  unset")
            continue
        origin, loaded_value = _loaded.get(key, (_PROCESS, value))
        if loaded_value != value:
            origin = _PROCESS  # overwritten by the process after load_dotenv() set it
        lines.append(f"{key:<{width}}  {_shown(key, value)}  [{origin}]")
    return "\n".join(lines)
