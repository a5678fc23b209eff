"""docker/base-image.sh: Debian's debian:bookworm-slim where a registry gives it (no root,
nothing of this host in it), the debootstrap fallback only where none does, as root, said
before."""

from __future__ import annotations

from pathlib import Path

from tests.setup.stubs import run_script

TAG = "flowerbox-base:bookworm"


def test_a_present_bookworm_slim_is_the_base_without_root_or_a_pull(tmp_path: Path) -> None:
    run = run_script("base-image.sh", tmp_path, flags=("up", "have/debian_bookworm-slim"))
    assert run.code == 0, run.said
    assert run.called(f"docker tag debian:bookworm-slim {TAG}")
    assert not run.called("docker pull") and not run.called("debootstrap")


def test_a_pullable_bookworm_slim_is_pulled_and_becomes_the_base(tmp_path: Path) -> None:
    run = run_script("base-image.sh", tmp_path, flags=("up", "pullable"))
    assert run.code == 0, run.said
    assert run.called("docker pull -q debian:bookworm-slim")
    assert run.called(f"docker tag debian:bookworm-slim {TAG}")
    assert not run.called("debootstrap") and not run.called("apt-get")
    assert not run.called("docker import")  # nothing of this host (its CA bundle) in the base


def test_an_existing_base_is_kept(tmp_path: Path) -> None:
    run = run_script("base-image.sh", tmp_path, flags=("up", "have/flowerbox-base_bookworm"))
    assert run.code == 0, run.said
    assert not run.called("docker pull") and not run.called("docker tag")


def test_no_registry_within_the_time_limit_tells_a_user_the_root_fallback(
    tmp_path: Path,
) -> None:
    run = run_script(
        "base-image.sh",
        tmp_path,
        flags=("up", "pull-hangs"),
        env={"FLOWERBOX_PULL_TIMEOUT": "1"},
    )
    assert run.code == 1
    assert "no registry gave debian:bookworm-slim within 1s" in run.said
    assert "debootstrap needs root" in run.said
    assert "run `sudo bash docker/base-image.sh` once" in run.said
    assert not run.called("debootstrap") and not run.called("apt-get")


def test_no_registry_as_root_falls_back_to_debootstrap(tmp_path: Path) -> None:
    run = run_script(
        "base-image.sh",
        tmp_path,
        flags=("up",),
        root=True,
        missing=("debootstrap",),
        env={"FLOWERBOX_DEBIAN_MIRROR": "http://mirror.invalid/debian"},
    )
    # apt-get is a stand-in here, so the installed debootstrap never appears: the install is
    # asked for, said first, and the run stops at the missing command.
    assert run.called("apt-get install -y -qq --no-install-recommends debootstrap")
    assert "installing debootstrap (apt, as root)" in run.said
    run = run_script(
        "base-image.sh",
        tmp_path / "again",
        flags=("up",),
        root=True,
        env={"FLOWERBOX_DEBIAN_MIRROR": "http://mirror.invalid/debian"},
    )
    assert run.code == 0, run.said
    assert run.called("debootstrap --variant=minbase")
    assert run.called("docker import")
    assert not run.called("docker tag")
