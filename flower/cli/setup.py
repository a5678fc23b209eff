"""`flower setup [MODEL]`: write the global .env, then check that the credentials work.

The file is `${XDG_CONFIG_HOME:-~/.config}/flower/.env` (entry 4 of the lookup order in
flower.core.env), mode 0600 in a 0700 folder, replaced atomically; its other lines are kept.
The key is typed at a hidden prompt, read from the first line of stdin when stdin is not a
terminal (`printf %s "$KEY" | flower setup`), or read from the environment variable named by
`--key-from-env` (CI): a secret never appears in argv, on screen or in a log. What was given
must look like a credential (flower.cli.setup.checked_secret) before anything is written.

The probe is a real `POST <base>/v1/messages` with max_tokens=16 (never 1: a model that must
think cannot fit its reasoning in one token and the server struggles for up to 30 s) and a 20 s
timeout, through urllib, so HTTP(S)_PROXY and NO_PROXY apply as for any Python client.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from flower.cli.exits import STDERR, Exit, exit_codes
from flower.core import lang
from flower.core.env import Lookup, dotenv_entry, parse_dotenv
from flower.errors import UsageError

if TYPE_CHECKING:
    import urllib.error

API_KEY = "ANTHROPIC_API_KEY"
AUTH_TOKEN = "ANTHROPIC_AUTH_TOKEN"
BASE_URL = "ANTHROPIC_BASE_URL"
MODEL_KEYS = ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL")
DEFAULT_BASE_URL = "https://api.anthropic.com"
PROBE_MODEL = "claude-sonnet-4-5"
"""The model the probe asks when neither MODEL nor the file names one."""
PROBE_TIMEOUT = 20.0
PROBE_MAX_TOKENS = 16
ANTHROPIC_VERSION = "2023-06-01"
KEY_PREFIX = "sk-ant-"  # every key the Anthropic API issues starts so
SHORTEST_SECRET = 8  # no key or token is shorter: catches a stray character, a cut paste


@dataclass(frozen=True)
class ProbeResult:
    """What the probe learned: `exit` is the code `flower setup` ends with."""

    exit: Exit
    message: str


def setup(
    model: Annotated[
        str | None,
        typer.Argument(
            help="Model id to use; written as ANTHROPIC_MODEL, ANTHROPIC_DEFAULT_OPUS_MODEL and "
            "ANTHROPIC_DEFAULT_SONNET_MODEL together.",
            show_default=False,
        ),
    ] = None,
    key_from_env: Annotated[
        str | None,
        typer.Option(
            "--key-from-env",
            metavar="VAR",
            help="Read the key from this environment variable instead of prompting (CI).",
            show_default=False,
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="API endpoint (a gateway or proxy); written as ANTHROPIC_BASE_URL.",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        bool,
        typer.Option(
            "--token",
            help="The secret is a bearer token (ANTHROPIC_AUTH_TOKEN), not an API key.",
        ),
    ] = False,
    probe: Annotated[
        bool, typer.Option("--probe/--no-probe", help="Check the credentials with one request.")
    ] = True,
) -> None:
    """Save credentials to the global .env and check them: 0 if they work, 2 if not."""
    console = Console(highlight=False, soft_wrap=True)
    with exit_codes():
        path = Lookup.from_process().global_dotenv
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        current = parse_dotenv(text)
        name, other = (AUTH_TOKEN, API_KEY) if token else (API_KEY, AUTH_TOKEN)
        url = _checked_url(base_url) if base_url is not None else None
        endpoint = url or current.get(BASE_URL) or DEFAULT_BASE_URL
        secret = checked_secret(
            name, _secret(name, key_from_env, current.get(name, "")), endpoint=endpoint
        )
        changes: dict[str, str | None] = {name: secret, other: None}
        if url is not None:
            changes[BASE_URL] = url
        if model is not None:
            changes.update(dict.fromkeys(MODEL_KEYS, model))
        write_dotenv(path, set_keys(text, changes))
        console.print(lang.text("say.wrote_private", path=escape(str(path))))
        for key, value in changes.items():
            if value is None:
                if key in current:
                    console.print("  " + lang.text("say.removed", what=key))
                continue
            shown = masked(value) if key in (API_KEY, AUTH_TOKEN) else value
            console.print(f"  {key}={escape(shown)}")
            if key in os.environ:
                note = lang.text("say.env_overrides", key=key)
                STDERR.print(f"[yellow]{lang.text('say.note')}[/] {note}")
        if not probe:
            return
        result = probe_credentials(
            base_url=endpoint,
            secret=secret,
            bearer=token,
            model=model or current.get(MODEL_KEYS[0]) or PROBE_MODEL,
        )
    if result.exit is Exit.OK:
        console.print(f"[green]ok:[/] {escape(result.message)}")
    else:
        STDERR.print(f"[bold red]{lang.text('say.probe_failed')}[/] {escape(result.message)}")
    raise typer.Exit(result.exit)


def _secret(name: str, key_from_env: str | None, existing: str) -> str:
    """The secret to write: from the named variable, typed at a terminal, or the first line
    of stdin when it is not one (an empty line, or Enter at the prompt, keeps `existing`)."""
    if key_from_env is not None:
        value = os.environ.get(key_from_env, "").strip()
        if not value:
            raise UsageError(lang.text("setup.env_unset", name=key_from_env))
        return value
    if not sys.stdin.isatty():  # a hidden prompt needs a terminal: read what is piped in
        value = sys.stdin.readline().strip() or existing
        if not value:
            raise UsageError(lang.text("setup.no_stdin", name=name))
        return value
    keep = f" (Enter keeps {masked(existing)})" if existing else ""
    typed: str = typer.prompt(
        f"{name}{keep}", default=existing, show_default=False, hide_input=True
    )
    value = typed.strip()
    if not value:
        raise UsageError(lang.text("setup.none_given", name=name))
    return value


def checked_secret(name: str, value: str, *, endpoint: str) -> str:
    """`value` if it can be a credential: printable ASCII without spaces, at least
    SHORTEST_SECRET characters, and for an API key sent to the Anthropic API itself, starting
    with `sk-ant-` (a gateway's keys and bearer tokens have shapes of their own)."""
    if not value.isascii() or not value.isprintable() or any(c.isspace() for c in value):
        raise UsageError(lang.text("setup.bad_chars", name=name))
    if len(value) < SHORTEST_SECRET:
        raise UsageError(lang.text("setup.too_short", name=name, length=len(value)))
    if name == API_KEY and endpoint == DEFAULT_BASE_URL and not value.startswith(KEY_PREFIX):
        raise UsageError(
            lang.text("setup.not_sk_ant", name=name, masked=masked(value), prefix=KEY_PREFIX)
        )
    return value


def _checked_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UsageError(lang.text("setup.bad_url", url=repr(url)))
    return url


def masked(value: str) -> str:
    """A secret as describe() shows it: a 4-character prefix (long secrets only) and length."""
    prefix = value[:4] if len(value) >= 16 else ""
    return f"{prefix}... ({len(value)} chars)"


def set_keys(text: str, changes: dict[str, str | None]) -> str:
    """`text` (a .env file) with each key of `changes` set to its value, or removed for None.

    A key's first line is rewritten in place and its later duplicates dropped (they would be
    ignored anyway); new keys go at the end. Every other line is kept as it was.
    """
    for key, value in changes.items():
        if value is not None and ("\n" in value or "\r" in value):
            raise UsageError(lang.text("setup.multiline", key=key))
    lines: list[str] = []
    done: set[str] = set()
    for line in text.splitlines():
        name = _key_of(line)
        if name is None or name not in changes:
            lines.append(line)
            continue
        new = changes[name]
        if name not in done and new is not None:
            lines.append(f"{name}={new}")
        done.add(name)
    lines += [f"{k}={v}" for k, v in changes.items() if v is not None and k not in done]
    return "\n".join(lines) + "\n" if lines else ""


def _key_of(line: str) -> str | None:
    """The key a .env line sets, by parse_dotenv's rules, or None for a comment or junk."""
    entry = dotenv_entry(line)
    return entry[0] if entry else None


def write_dotenv(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically, mode 0600 before the rename, folder 0700.

    A symlinked file is followed: its target is replaced, the link stays.
    """
    path = path.resolve()
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, mode=0o700)
        path.parent.chmod(0o700)  # mkdir's mode is filtered by the umask
    fd, tmp = tempfile.mkstemp(prefix=".env.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def probe_credentials(
    *, base_url: str, secret: str, bearer: bool, model: str, timeout: float = PROBE_TIMEOUT
) -> ProbeResult:
    """Send one small real request and say plainly what the answer means."""
    # lazy: an HTTP client costs every start of both CLIs; only the check of a key uses it
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/v1/messages"
    auth = {"authorization": f"Bearer {secret}"} if bearer else {"x-api-key": secret}
    body = {
        "model": model,
        "max_tokens": PROBE_MAX_TOKENS,
        "messages": [{"role": "user", "content": "Reply with the word ok."}],
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
            **auth,
        },
        method="POST",
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        return _refused(exc.code, _api_message(exc), base_url=base_url, model=model)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return ProbeResult(
            Exit.USAGE,
            f"cannot reach {url} ({reason}): check the base URL and your network "
            "(HTTPS_PROXY / NO_PROXY if you are behind a proxy)",
        )
    elapsed = time.monotonic() - started
    return ProbeResult(Exit.OK, f"{url} answered with {model} in {elapsed:.1f} s")


def _api_message(exc: urllib.error.HTTPError) -> str:
    raw = exc.read()
    try:
        return str(json.loads(raw)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return raw.decode("utf-8", "replace").strip()[:200] or str(exc.reason)


def _refused(status: int, message: str, *, base_url: str, model: str) -> ProbeResult:
    said = f"HTTP {status}: {message}"
    if status in (401, 403):
        return ProbeResult(
            Exit.USAGE,
            f"the key was refused ({said}): it is wrong, revoked or not for {base_url}; "
            "run `flower setup` again with the right one",
        )
    if status in (400, 404):
        return ProbeResult(
            Exit.USAGE,
            f"the request was refused ({said}): check the model name {model!r} and the base "
            f"URL {base_url}",
        )
    return ProbeResult(
        Exit.FAILED,
        f"the API could not answer now ({said}); the key was not refused: "
        "run `flower setup` again later (Enter keeps the key)",
    )
