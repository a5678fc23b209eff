"""`flower setup`: the global .env it writes, and its probe against the fake API."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.cli.setup import MODEL_KEYS, set_keys
from flower.testing import Always, FakeAPI, text
from tests.cli.conftest import FLOWER, on_a_terminal

RIGHT = "sk-ant-right-0123456789abcdef"
WRONG = "sk-ant-wrong-0123456789abcdef"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """A scratch HOME and config dir, nothing of the developer's credentials or proxies."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "FLOWER_"))
    }
    return {
        **base,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        **extra,
    }


def flower_setup(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`flower setup ARGS` without a terminal: stdin is `stdin` piped in, or /dev/null."""
    return subprocess.run(
        [*FLOWER, "setup", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )


def dotenv(home: Path) -> Path:
    return home / ".config" / "flower" / ".env"


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI(Always(text("ok")), api_key=RIGHT) as server:
        yield server


def test_setup_writes_0600_with_the_three_model_keys_and_probes(
    api: FakeAPI, tmp_path: Path
) -> None:
    path = dotenv(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("# mine\nFOO=bar\nANTHROPIC_MODEL=old\nANTHROPIC_API_KEY=sk-old\n")
    done = flower_setup(
        "claude-opus-4-7",
        "--key-from-env",
        "MY_KEY",
        "--base-url",
        api.url,
        env=env_for(tmp_path, MY_KEY=RIGHT),
    )
    assert done.returncode == 0, done.stderr
    lines = path.read_text().splitlines()
    assert lines[:2] == ["# mine", "FOO=bar"]  # the user's lines stay, in place
    assert "ANTHROPIC_MODEL=claude-opus-4-7" in lines and "ANTHROPIC_MODEL=old" not in lines
    for key in MODEL_KEYS:
        assert f"{key}=claude-opus-4-7" in lines
    assert f"ANTHROPIC_API_KEY={RIGHT}" in lines and f"ANTHROPIC_BASE_URL={api.url}" in lines
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert list(path.parent.iterdir()) == [path]  # no temp left behind
    assert RIGHT not in done.stdout + done.stderr
    assert "sk-a... (29 chars)" in done.stdout and "ok:" in done.stdout
    (probe,) = api.requests
    assert probe.body["max_tokens"] == 16 and probe.body["model"] == "claude-opus-4-7"
    assert probe.headers["anthropic-version"] == "2023-06-01"
    assert api.saw_key(RIGHT)


def test_a_new_config_folder_is_0700(api: FakeAPI, tmp_path: Path) -> None:
    done = flower_setup(
        "--key-from-env", "MY_KEY", "--no-probe", env=env_for(tmp_path, MY_KEY=RIGHT)
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(dotenv(tmp_path).parent.stat().st_mode) == 0o700
    assert dotenv(tmp_path).read_text() == f"ANTHROPIC_API_KEY={RIGHT}\n"
    assert api.requests == []  # --no-probe


def test_a_refused_key_exits_two_and_says_so(api: FakeAPI, tmp_path: Path) -> None:
    done = flower_setup(
        "--key-from-env", "MY_KEY", "--base-url", api.url, env=env_for(tmp_path, MY_KEY=WRONG)
    )
    assert done.returncode == 2
    assert "the key was refused (HTTP 401: invalid x-api-key)" in done.stderr
    assert WRONG not in done.stdout + done.stderr
    assert f"ANTHROPIC_API_KEY={WRONG}" in dotenv(tmp_path).read_text()  # kept, to be fixed


def test_an_unreachable_base_url_exits_two(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    done = flower_setup(
        "--key-from-env", "MY_KEY", "--base-url", closed, env=env_for(tmp_path, MY_KEY=RIGHT)
    )
    assert done.returncode == 2
    assert f"cannot reach {closed}/v1/messages" in done.stderr
    assert "check the base URL and your network" in done.stderr


def test_a_bearer_token_replaces_the_api_key(api: FakeAPI, tmp_path: Path) -> None:
    path = dotenv(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("ANTHROPIC_API_KEY=sk-old\n")
    done = flower_setup(
        "--token",
        "--key-from-env",
        "MY_TOKEN",
        "--base-url",
        api.url,
        env=env_for(tmp_path, MY_TOKEN=RIGHT),
    )
    assert done.returncode == 0, done.stderr
    assert path.read_text().splitlines() == [
        f"ANTHROPIC_AUTH_TOKEN={RIGHT}",
        f"ANTHROPIC_BASE_URL={api.url}",
    ]
    assert "removed ANTHROPIC_API_KEY" in done.stdout
    assert "authorization" in api.requests[0].headers and "x-api-key" not in api.requests[0].headers


def test_key_from_an_unset_variable_is_a_usage_error(tmp_path: Path) -> None:
    done = flower_setup("--key-from-env", "NOPE", env=env_for(tmp_path))
    assert done.returncode == 2
    assert "--key-from-env NOPE: that environment variable is unset or empty" in done.stderr
    assert not dotenv(tmp_path).exists()


def test_the_environment_shadowing_the_file_is_pointed_out(tmp_path: Path) -> None:
    env = env_for(tmp_path, MY_KEY=RIGHT, ANTHROPIC_API_KEY="sk-from-the-shell")
    done = flower_setup("--key-from-env", "MY_KEY", "--no-probe", env=env)
    assert done.returncode == 0
    assert "ANTHROPIC_API_KEY is also set in your environment" in done.stderr
    assert "sk-from-the-shell" not in done.stdout + done.stderr


def test_the_key_is_typed_at_a_hidden_prompt_and_enter_keeps_it(
    api: FakeAPI, tmp_path: Path
) -> None:
    env = env_for(tmp_path)
    with on_a_terminal("setup", "--base-url", api.url, env=env, cwd=tmp_path) as (proc, typed):
        typed.expect("ANTHROPIC_API_KEY:")
        time.sleep(1.0)  # getpass flushes what was typed before it took the terminal
        typed.type(RIGHT)
        typed.expect("ok:")
        assert proc.wait(timeout=30) == 0
    assert RIGHT not in typed.text  # hidden input is not echoed
    assert f"ANTHROPIC_API_KEY={RIGHT}" in dotenv(tmp_path).read_text()
    with on_a_terminal("setup", "claude-x", env=env, cwd=tmp_path) as (proc, kept):
        kept.expect("(Enter keeps sk-a... (29 chars))")
        time.sleep(1.0)
        kept.type("")  # Enter: keep the key
        kept.expect("ok:")
        assert proc.wait(timeout=30) == 0
    assert RIGHT not in kept.text
    assert f"ANTHROPIC_API_KEY={RIGHT}" in dotenv(tmp_path).read_text()
    assert api.requests[-1].body["model"] == "claude-x"


def test_without_a_terminal_the_key_comes_from_stdin(api: FakeAPI, tmp_path: Path) -> None:
    """CI and scripts: `printf %s "$KEY" | flower setup`. Before, getpass warned and setup
    ended with an empty error."""
    piped = flower_setup("--base-url", api.url, env=env_for(tmp_path), stdin=RIGHT)
    assert piped.returncode == 0, piped.stderr
    assert f"ANTHROPIC_API_KEY={RIGHT}" in dotenv(tmp_path).read_text()
    assert RIGHT not in piped.stdout + piped.stderr and "Warning" not in piped.stderr
    kept = flower_setup("claude-x", "--no-probe", env=env_for(tmp_path), stdin="\n")
    assert kept.returncode == 0 and f"ANTHROPIC_API_KEY={RIGHT}" in dotenv(tmp_path).read_text()


def test_without_a_terminal_and_nothing_piped_it_says_how(tmp_path: Path) -> None:
    done = flower_setup(env=env_for(tmp_path))  # stdin is /dev/null
    assert done.returncode == 2
    assert "no ANTHROPIC_API_KEY on stdin, which is not a terminal: pipe it in" in done.stderr
    assert "--key-from-env VAR" in done.stderr and "Warning" not in done.stderr
    assert not dotenv(tmp_path).exists()


@pytest.mark.parametrize(
    ("secret", "args", "said"),
    [
        ("x", [], "the ANTHROPIC_API_KEY given is 1 characters long, too short for a key"),
        ("sk-ant-a b-0123456789", [], "holds a space or a character no key has"),
        ("Bearer " + RIGHT, ["--token"], "holds a space or a character no key has"),
        ("sk-ant-clé-0123456789", [], "holds a space or a character no key has"),
        ("0123456789abcdef0123", [], "does not start with sk-ant-, as keys of the Anthropic"),
    ],
)
def test_a_secret_that_is_no_credential_is_refused_before_writing(
    tmp_path: Path, secret: str, args: list[str], said: str
) -> None:
    done = flower_setup(*args, "--no-probe", env=env_for(tmp_path), stdin=secret)
    assert done.returncode == 2 and said in done.stderr
    assert secret not in done.stdout + done.stderr
    assert not dotenv(tmp_path).exists()


def test_a_gateways_own_key_needs_no_anthropic_prefix(tmp_path: Path) -> None:
    done = flower_setup(
        "--base-url", "http://127.0.0.1:9", "--no-probe", env=env_for(tmp_path), stdin="gw-12345"
    )
    assert done.returncode == 0, done.stderr
    assert "ANTHROPIC_API_KEY=gw-12345" in dotenv(tmp_path).read_text()


def test_a_symlinked_dotenv_keeps_its_link(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "flower.env"
    target.parent.mkdir()
    target.write_text("A=1\n")
    dotenv(tmp_path).parent.mkdir(parents=True)
    dotenv(tmp_path).symlink_to(target)
    done = flower_setup("--key-from-env", "K", "--no-probe", env=env_for(tmp_path, K=RIGHT))
    assert done.returncode == 0, done.stderr
    assert dotenv(tmp_path).is_symlink()
    assert target.read_text() == f"A=1\nANTHROPIC_API_KEY={RIGHT}\n"


@pytest.mark.english
def test_set_keys_rewrites_in_place_drops_duplicates_and_removes() -> None:
    before = "# c\nA=1\nexport X=2\nB = 'old'\nB=dup\n\nC=3"
    after = set_keys(before, {"B": "new", "C": None, "D": "4"})
    assert after == "# c\nA=1\nexport X=2\nB=new\n\nD=4\n"
    with pytest.raises(ValueError, match="cannot span lines"):
        set_keys("", {"A": "1\n2"})


def test_setup_replaces_an_exported_key_instead_of_adding_one_it_would_lose_to() -> None:
    """A .env copied from a shell script (`export KEY=...`) sets KEY, and the first value
    wins: a new key appended below the old line would never be read."""
    after = set_keys("export ANTHROPIC_API_KEY=sk-old # mine\n", {"ANTHROPIC_API_KEY": "sk-new"})
    assert after == "ANTHROPIC_API_KEY=sk-new\n"
