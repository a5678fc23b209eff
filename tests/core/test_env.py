"""The .env rules and the credential lookup order of the configuration page, one rule a test."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from flower.core import env
from flower.core.env import (
    KNOWN,
    DotenvError,
    Lookup,
    check_credentials,
    describe,
    load_dotenv,
    parse_dotenv,
    source_root,
)

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english

KEY = "ANTHROPIC_API_KEY"
TOKEN = "ANTHROPIC_AUTH_TOKEN"
URL = "ANTHROPIC_BASE_URL"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A scratch HOME and cwd, none of the keys set, and os.environ restored afterwards.

    load_dotenv() writes os.environ keys that monkeypatch never saw, so the whole mapping is
    saved and put back.
    """
    saved = dict(os.environ)
    for key in (*KNOWN, "FLOWER_ENV", "XDG_CONFIG_HOME"):
        os.environ.pop(key, None)
    os.environ["HOME"] = str(tmp_path / "home")
    for name in ("home", "cwd", "src"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(env, "_loaded", {})
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def lookup(tmp_path: Path) -> Lookup:
    home = tmp_path / "home"
    return Lookup(
        cwd=tmp_path / "cwd", home=home, config_home=home / ".config", source=tmp_path / "src"
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def settings(lookup: Lookup, name: str, text: str) -> Path:
    return write(lookup.home / ".claude" / name, text)


# --- .env parsing rules -----------------------------------------------------------------------


def test_blank_and_comment_lines_are_skipped() -> None:
    assert parse_dotenv("\n   \n# A=1\n  #B=2\nC=3\n") == {"C": "3"}


def test_line_without_equals_is_skipped() -> None:
    assert parse_dotenv("JUSTAWORD\nA=1") == {"A": "1"}


def test_split_at_the_first_equals() -> None:
    assert parse_dotenv("A=b=c") == {"A": "b=c"}


def test_key_and_value_are_stripped() -> None:
    assert parse_dotenv("   A  =   1 2   ") == {"A": "1 2"}


def test_leading_and_trailing_quotes_are_removed_paired_or_not() -> None:
    text = 'A="x"\nB=\'y\'\nC="z\nD=w\'\nE=\'"v"\'\nF="in"side"'
    assert parse_dotenv(text) == {"A": "x", "B": "y", "C": "z", "D": "w", "E": "v", "F": 'in"side'}


def test_quoted_spaces_inside_are_kept() -> None:
    assert parse_dotenv('A="  padded  "') == {"A": "  padded  "}


def test_an_export_prefix_is_the_shells_and_not_part_of_the_key() -> None:
    """Every other tool reads `export KEY=...` as KEY (issue 21: it silently became a
    variable named `export KEY`, so a key copied from a shell script was never found)."""
    text = "export ANTHROPIC_API_KEY=sk-1\nexport\tB=2\nexporter=3"
    assert parse_dotenv(text) == {"ANTHROPIC_API_KEY": "sk-1", "B": "2", "exporter": "3"}


def test_an_inline_comment_after_a_space_is_a_comment() -> None:
    """`A=1 # c` is `1` (it was `1 # c`: a key with a note after it stopped working); a `#`
    with no space before it, or inside quotes, is the value's."""
    text = 'A=1 # c\nB=x#frag\nC="a # b" # c\nD="a # b"\nE=\'v\'\t# c\nF=#x\nG= # c'
    assert parse_dotenv(text) == {
        "A": "1",
        "B": "x#frag",
        "C": "a # b",
        "D": "a # b",
        "E": "v",
        "F": "#x",  # as a shell reads it: a comment starts a word
        "G": "",
    }


def test_escapes_are_not_recognised() -> None:
    assert parse_dotenv(r'A="a\nb"') == {"A": r"a\nb"}


def test_multi_line_values_are_not_recognised() -> None:
    assert parse_dotenv('A="first\nsecond"') == {"A": "first"}


def test_a_line_with_an_empty_key_is_skipped() -> None:
    assert parse_dotenv("=orphan\nA=1") == {"A": "1"}


def test_every_key_is_loaded_without_a_whitelist(lookup: Lookup) -> None:
    write(lookup.cwd / ".env", "MY_OWN_SETTING=yes\n")
    load_dotenv(lookup=lookup)
    assert os.environ["MY_OWN_SETTING"] == "yes"


# --- lookup order -----------------------------------------------------------------------------


def test_process_environment_beats_every_file(lookup: Lookup, tmp_path: Path) -> None:
    os.environ[KEY] = "from-process"
    flower_env = write(tmp_path / "named.env", f"{KEY}=named")
    write(lookup.cwd / ".env", f"{KEY}=cwd")
    write(lookup.global_dotenv, f"{KEY}=global")
    settings(lookup, "settings.json", f'{{"env": {{"{KEY}": "claude"}}}}')
    looked = replace(lookup, flower_env=flower_env)
    assert load_dotenv(lookup=looked) == {}
    assert os.environ[KEY] == "from-process"


def test_flower_env_file_beats_cwd_dotenv(lookup: Lookup, tmp_path: Path) -> None:
    named = write(tmp_path / "named.env", f"{KEY}=named")
    write(lookup.cwd / ".env", f"{KEY}=cwd")
    looked = replace(lookup, flower_env=named)
    assert load_dotenv(lookup=looked) == {KEY: f"$FLOWER_ENV {named}"}
    assert os.environ[KEY] == "named"


def test_cwd_dotenv_beats_global(lookup: Lookup) -> None:
    write(lookup.cwd / ".env", f"{KEY}=cwd")
    write(lookup.global_dotenv, f"{KEY}=global")
    load_dotenv(lookup=lookup)
    assert os.environ[KEY] == "cwd"


def test_global_beats_source_checkout(lookup: Lookup) -> None:
    assert lookup.source is not None
    write(lookup.global_dotenv, f"{KEY}=global")
    write(lookup.source / ".env", f"{KEY}=source")
    load_dotenv(lookup=lookup)
    assert os.environ[KEY] == "global"


@pytest.mark.parametrize("entry", ["./.env", "global .env", "source .env"])
def test_every_dotenv_beats_claude_settings(lookup: Lookup, entry: str) -> None:
    path = dict(lookup.dotenv_files())[entry]
    write(path, f"{KEY}=dotenv")
    settings(lookup, "settings.json", f'{{"env": {{"{KEY}": "claude"}}}}')
    load_dotenv(lookup=lookup)
    assert os.environ[KEY] == "dotenv"


def test_source_entry_is_absent_when_not_running_from_source(lookup: Lookup) -> None:
    installed = replace(lookup, source=None)
    assert [label for label, _ in installed.dotenv_files()] == ["./.env", "global .env"]


def test_priority_is_per_key_not_per_file(lookup: Lookup) -> None:
    write(lookup.cwd / ".env", f"{URL}=http://gateway\n")
    write(lookup.global_dotenv, f"{URL}=http://ignored\n{TOKEN}=tok\n")
    origins = load_dotenv(lookup=lookup)
    assert (os.environ[URL], os.environ[TOKEN]) == ("http://gateway", "tok")
    assert origins == {
        URL: f"./.env {lookup.cwd / '.env'}",
        TOKEN: f"global .env {lookup.global_dotenv}",
    }


def test_an_empty_value_occupies_the_key(lookup: Lookup) -> None:
    write(lookup.cwd / ".env", f"{TOKEN}=\n")
    write(lookup.global_dotenv, f"{TOKEN}=real-token\n")
    load_dotenv(lookup=lookup)
    assert os.environ[TOKEN] == ""
    assert check_credentials() is not None


def test_explicit_path_reads_that_file_alone(lookup: Lookup, tmp_path: Path) -> None:
    explicit = write(tmp_path / "only.env", f"{URL}=http://explicit\n")
    write(lookup.cwd / ".env", f"{KEY}=cwd\n")
    settings(lookup, "settings.json", f'{{"env": {{"{TOKEN}": "claude"}}}}')
    assert load_dotenv(explicit, lookup=lookup) == {URL: f"explicit {explicit}"}
    assert KEY not in os.environ and TOKEN not in os.environ


def test_explicit_path_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DotenvError, match="no such .env file") as info:
        load_dotenv(tmp_path / "missing.env")
    assert info.value.path == tmp_path / "missing.env"


def test_an_unreadable_dotenv_names_the_file(lookup: Lookup) -> None:
    (lookup.cwd / ".env").write_bytes(b"A=\xff\xfe\n")
    with pytest.raises(DotenvError, match=r"cwd/\.env: cannot read"):
        load_dotenv(lookup=lookup)


def test_no_files_at_all_sets_nothing(lookup: Lookup) -> None:
    assert load_dotenv(lookup=lookup) == {}
    assert not any(key in os.environ for key in KNOWN)


# --- entry 6: ~/.claude settings --------------------------------------------------------------


def test_claude_settings_lend_only_the_nine_known_keys(lookup: Lookup) -> None:
    block = {key: f"v-{key}" for key in KNOWN} | {"OTHER": "x", "CLAUDE_CODE_USE_BEDROCK": "1"}
    text = json.dumps({"permissions": {"allow": ["Bash"]}, "env": block})
    settings(lookup, "settings.json", text)
    assert set(load_dotenv(lookup=lookup)) == set(KNOWN)
    assert "OTHER" not in os.environ and "CLAUDE_CODE_USE_BEDROCK" not in os.environ


def test_settings_local_json_only_fills_what_settings_json_left(lookup: Lookup) -> None:
    settings(lookup, "settings.json", f'{{"env": {{"{KEY}": "main"}}}}')
    settings(lookup, "settings.local.json", f'{{"env": {{"{KEY}": "local", "{URL}": "http://l"}}}}')
    load_dotenv(lookup=lookup)
    assert (os.environ[KEY], os.environ[URL]) == ("main", "http://l")


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"env": ["ANTHROPIC_API_KEY"]}',
        b'{"env": {"ANTHROPIC_API_KEY": 5}}',
    ],
    ids=["not-json", "not-utf8", "not-an-object", "env-not-a-dict", "value-not-a-string"],
)
def test_a_broken_settings_json_is_ignored(lookup: Lookup, content: bytes) -> None:
    settings(lookup, "settings.json", "")
    (lookup.home / ".claude" / "settings.json").write_bytes(content)
    settings(lookup, "settings.local.json", f'{{"env": {{"{TOKEN}": "local"}}}}')
    assert load_dotenv(lookup=lookup) == {
        TOKEN: f"~/.claude/settings.local.json {lookup.home / '.claude/settings.local.json'}"
    }


def test_an_unreadable_settings_json_is_ignored(lookup: Lookup) -> None:
    (lookup.home / ".claude" / "settings.json").mkdir(parents=True)  # reading raises OSError
    assert load_dotenv(lookup=lookup) == {}


# --- where the lookup reads -------------------------------------------------------------------


def test_from_process_reads_home_xdg_and_a_relative_flower_env(tmp_path: Path) -> None:
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    os.environ["FLOWER_ENV"] = "conf/my.env"
    looked = Lookup.from_process()
    assert looked.home == tmp_path / "home"
    assert looked.global_dotenv == tmp_path / "xdg" / "flower" / ".env"
    assert looked.flower_env == Path.cwd() / "conf" / "my.env"


def test_empty_xdg_and_flower_env_count_as_unset(tmp_path: Path) -> None:
    os.environ["XDG_CONFIG_HOME"] = ""
    os.environ["FLOWER_ENV"] = ""
    looked = Lookup.from_process()
    assert looked.global_dotenv == tmp_path / "home" / ".config" / "flower" / ".env"
    assert looked.flower_env is None


def test_source_root_is_this_checkout_when_running_from_source() -> None:
    root = source_root()
    assert root is not None and (root / "flower" / "core" / "env.py").is_file()


@pytest.mark.parametrize("layout", ["site-packages", "no-pyproject"])
def test_source_root_is_none_for_an_installed_flower(tmp_path: Path, layout: str) -> None:
    root = tmp_path / layout
    module = write(root / "flower" / "core" / "env.py", "")
    if layout == "site-packages":
        write(root / "pyproject.toml", "")
    assert source_root(module) is None


# --- check_credentials and describe -----------------------------------------------------------


@pytest.mark.parametrize("key", [KEY, TOKEN])
def test_either_credential_is_enough(key: str) -> None:
    os.environ[key] = "secret"
    assert check_credentials() is None


def test_missing_credentials_say_where_to_put_them(tmp_path: Path) -> None:
    os.environ[KEY] = ""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    message = check_credentials()
    assert message is not None
    lines = message.splitlines()
    assert len(lines) == 4
    assert "flower setup" in lines[1] and str(tmp_path / "xdg" / "flower" / ".env") in lines[1]
    assert "./.env" in lines[2] and "FLOWER_ENV=" in lines[3]


def test_describe_names_each_origin_and_masks_secrets(lookup: Lookup) -> None:
    secret = "sk-ant-0123456789abcdefghij"
    os.environ[URL] = "http://127.0.0.1:9"
    write(lookup.cwd / ".env", f"{KEY}={secret}\n")
    load_dotenv(lookup=lookup)
    lines = {line.split()[0]: line for line in describe().splitlines()}
    assert list(lines) == list(KNOWN)
    assert secret not in describe()
    assert "sk-a..." in lines[KEY] and f"({len(secret)} chars)" in lines[KEY]
    assert f"[./.env {lookup.cwd / '.env'}]" in lines[KEY]
    assert "http://127.0.0.1:9" in lines[URL] and "[process environment]" in lines[URL]
    assert lines[TOKEN].split()[1:] == ["unset"]


def test_describe_hides_the_prefix_of_a_short_secret() -> None:
    os.environ[TOKEN] = "abcdefgh"
    line = next(line for line in describe().splitlines() if line.startswith(TOKEN))
    assert "abcd" not in line and "(8 chars)" in line


def test_describe_reports_a_value_changed_after_loading_as_the_process_s(lookup: Lookup) -> None:
    write(lookup.cwd / ".env", f"{URL}=http://file\n")
    load_dotenv(lookup=lookup)
    os.environ[URL] = "http://changed"
    assert "[process environment]" in describe()
