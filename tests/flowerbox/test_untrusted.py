"""box.untrusted: what the box can plant under a root never redirects or hangs the host."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from flowerbox.box.untrusted import (
    drop,
    exists,
    read_bytes,
    read_json,
    real_folder,
    regular_file,
)
from flowerbox.errors import UntrustedFileError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "runs").mkdir(parents=True)
    return ws


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text("the user's secret\n")
    return path


def test_a_plain_file_is_read(root: Path) -> None:
    (root / "runs" / "asks.json").write_text('[{"id": "q1"}]')
    assert read_bytes(root, "runs/asks.json") == b'[{"id": "q1"}]'
    assert read_json(root, "runs/asks.json", []) == [{"id": "q1"}]
    assert read_bytes(root, "runs/missing.json") is None
    assert read_bytes(root, "nothing/here.json") is None


@pytest.mark.english
def test_a_link_at_the_file_or_on_the_way_is_refused(root: Path, secret: Path) -> None:
    (root / "runs" / "asks.json").symlink_to(secret)
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        read_bytes(root, "runs/asks.json")
    (root / "linked").symlink_to(secret.parent)
    with pytest.raises(UntrustedFileError, match="link or not a folder"):
        read_bytes(root, "linked/secret.txt")
    assert read_json(root, "linked/secret.txt", {}) == {}
    assert not regular_file(root, "linked/secret.txt")
    assert not real_folder(root, "linked")


def test_a_fifo_never_blocks_and_dev_zero_is_never_read(root: Path) -> None:
    os.mkfifo(root / "runs" / "gateway-usage.json")
    (root / "runs" / "zero").symlink_to("/dev/zero")
    done = threading.Event()

    def read_both() -> None:
        for name in ("gateway-usage.json", "zero"):
            with pytest.raises(UntrustedFileError):
                read_bytes(root, f"runs/{name}")
            assert read_json(root, f"runs/{name}", {}) == {}
        done.set()

    worker = threading.Thread(target=read_both, daemon=True)
    worker.start()
    worker.join(5)
    assert done.is_set(), "a FIFO or /dev/zero made the host wait"


@pytest.mark.english
def test_reads_are_bounded(root: Path) -> None:
    (root / "runs" / "big.json").write_bytes(b"[" + b" " * 4096 + b"]")
    with pytest.raises(UntrustedFileError, match="larger than 100 bytes"):
        read_bytes(root, "runs/big.json", limit=100)
    assert read_json(root, "runs/big.json", [], limit=100) == []


def test_json_of_another_type_or_junk_is_the_default(root: Path) -> None:
    (root / "runs" / "a.json").write_text('{"not": "a list"}')
    (root / "runs" / "b.json").write_bytes(b"\xff\xfe junk")
    assert read_json(root, "runs/a.json", []) == []
    assert read_json(root, "runs/b.json", {}) == {}


def test_escaping_the_root_is_refused(root: Path) -> None:
    with pytest.raises(ValueError, match="without \\.\\."):
        read_bytes(root, "../outside/secret.txt")
    with pytest.raises(ValueError):
        read_bytes(root, "/etc/passwd")


def test_drop_writes_inside_the_folder_only(root: Path, secret: Path) -> None:
    path = drop(root, "runs/inbox", "0001.json", b'{"send": "hi"}')
    assert path == root / "runs" / "inbox" / "0001.json"
    assert path.read_bytes() == b'{"send": "hi"}'
    assert [p.name for p in path.parent.iterdir()] == ["0001.json"]  # no temp left


def test_drop_through_a_planted_link_writes_nothing_outside(root: Path, secret: Path) -> None:
    before = secret.read_text()
    (root / "runs" / "inbox").symlink_to(secret.parent)
    with pytest.raises(UntrustedFileError):
        drop(root, "runs/inbox", "0001.json", b"{}")
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret.txt"]
    # A link at the final name is replaced by the rename, never written through.
    (root / "runs" / "inbox").unlink()
    (root / "runs" / "inbox").mkdir()
    (root / "runs" / "inbox" / "0002.json").symlink_to(secret)
    drop(root, "runs/inbox", "0002.json", b"{}")
    assert secret.read_text() == before
    assert not (root / "runs" / "inbox" / "0002.json").is_symlink()


def test_exists_sees_links_without_following_them(root: Path, secret: Path) -> None:
    (root / "link").symlink_to(secret)
    assert exists(root, "link") and not regular_file(root, "link")
    assert not exists(root, "nothing")


def test_json_nested_past_the_bound_is_the_default_never_a_crash(root: Path) -> None:
    """T2: 10 KB of `[` made flowerbox ps/logs/attach end in a RecursionError."""
    (root / "runs" / "asks.json").write_text("[" * 10_000 + "]" * 10_000)
    assert read_json(root, "runs/asks.json", ["default"]) == ["default"]
