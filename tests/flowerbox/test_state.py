"""flowerbox's own folders: the socket root a broker in a container mounts (state.socket_root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flowerbox.box import state
from flowerbox.errors import StateError


def test_the_socket_root_is_made_private_and_reused(tmp_path: Path) -> None:
    root = state.socket_root(tmp_path)
    assert root == tmp_path / f"flowerbox-{os.getuid()}"
    assert root.stat().st_mode & 0o777 == 0o700
    root.chmod(0o755)  # made by hand, say: tightened, kept
    (root / "fbx-run").mkdir()
    assert state.socket_root(tmp_path) == root and (root / "fbx-run").is_dir()
    assert root.stat().st_mode & 0o777 == 0o700


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
