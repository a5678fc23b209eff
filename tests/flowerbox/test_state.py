"""flowerbox's own folders: the socket root a broker in a container mounts (state.socket_root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flowerbox.box import state
from flowerbox.errors import StateError


@pytest.fixture
def default_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """No $FLOWERBOX_SOCKET_ROOT (the suite sets its own): the root is `under`'s."""
    monkeypatch.delenv(state.SOCKET_ROOT, raising=False)


@pytest.mark.usefixtures("default_root")
def test_the_socket_root_is_made_private_and_reused(tmp_path: Path) -> None:
    root = state.socket_root(tmp_path)
    assert root == tmp_path / f"flowerbox-{os.getuid()}"
    assert root.stat().st_mode & 0o777 == 0o700
    root.chmod(0o755)  # made by hand, say: tightened, kept
    (root / "fbx-run").mkdir()
    assert state.socket_root(tmp_path) == root and (root / "fbx-run").is_dir()
    assert root.stat().st_mode & 0o777 == 0o700


@pytest.mark.english
@pytest.mark.usefixtures("default_root")
def test_a_link_or_file_in_the_socket_roots_place_is_refused(tmp_path: Path) -> None:
    """Whoever made /tmp/flowerbox-<uid> first owns it: a link there would put every run's
    sockets in a folder of theirs."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = tmp_path / f"flowerbox-{os.getuid()}"
    planted.symlink_to(elsewhere)
    with pytest.raises(StateError, match="remove it") as raised:
        state.socket_root(tmp_path)
    assert raised.value.path == planted
    planted.unlink()
    planted.write_text("")
    with pytest.raises(StateError, match="not a folder of yours"):
        state.socket_root(tmp_path)
    assert list(elsewhere.iterdir()) == []


def test_flowerbox_socket_root_names_another_root_made_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's own (tests/hermetic.py): never the /tmp/flowerbox-<uid> a developer's
    runs and compose broker share."""
    named = tmp_path / "sockets"
    monkeypatch.setenv(state.SOCKET_ROOT, str(named))
    assert state.socket_root() == named
    assert named.stat().st_mode & 0o777 == 0o700
    assert not (tmp_path / f"flowerbox-{os.getuid()}").exists()
    assert state.socket_root(tmp_path) == named


@pytest.mark.english
@pytest.mark.parametrize(
    ("named", "said"),
    [("relative/sockets", "not an absolute path"), ("{tmp}/missing/sockets", "make its folder")],
)
def test_a_socket_root_that_cannot_be_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: str, said: str
) -> None:
    monkeypatch.setenv(state.SOCKET_ROOT, named.format(tmp=tmp_path))
    with pytest.raises(StateError, match=said) as raised:
        state.socket_root()
    assert state.SOCKET_ROOT in str(raised.value)
    assert not (tmp_path / "missing").exists()
