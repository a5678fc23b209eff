"""docker/engine.sh decides which engine `make demo` and CI use: the one that answers (the
system's), else the system's service set up as root, and it says what needs root before
needing it."""

from __future__ import annotations

from pathlib import Path

from tests.setup.stubs import run_script


def test_an_engine_that_answers_is_used_and_nothing_is_started(tmp_path: Path) -> None:
    run = run_script("engine.sh", tmp_path, flags=("up",), root=True)
    assert run.code == 0, run.said
    assert "using the Docker engine that answers (20.10.24)" in run.said
    assert [call.split()[:2] for call in run.calls] == [["docker", "info"]]


def test_without_an_engine_a_user_is_told_the_root_step_before_any_is_taken(
    tmp_path: Path,
) -> None:
    run = run_script("engine.sh", tmp_path, missing=("dockerd",))
    assert run.code == 1
    assert "Setting one up needs root, once: run `sudo bash docker/engine.sh`" in run.said
    assert "sudo usermod -aG docker newcomer" in run.said
    assert not run.called("apt-get") and not run.called("systemctl")
    assert not run.called("dockerd") and not run.called("setsid")


def test_a_user_the_engine_refuses_is_told_to_join_the_docker_group(tmp_path: Path) -> None:
    run = run_script("engine.sh", tmp_path, flags=("denied",))
    assert run.code == 1
    assert "refuses you (newcomer)" in run.said
    assert "`sudo usermod -aG docker newcomer`, log in again" in run.said
    assert not run.called("dockerd") and not run.called("apt-get")


def test_root_under_systemd_installs_docker_io_and_starts_the_system_service(
    tmp_path: Path,
) -> None:
    run = run_script("engine.sh", tmp_path, flags=("systemd",), root=True, missing=("dockerd",))
    assert run.code == 0, run.said
    first = run.said.splitlines()[0]
    assert first == "engine.sh: no Docker engine here: installing Debian's docker.io (apt, as root)"
    assert run.called("apt-get install -y -qq --no-install-recommends docker.io")
    assert run.called("systemctl enable --now docker")
    # The system's engine, never a private dockerd beside it.
    assert not run.called("dockerd") and not run.called("setsid")
    assert "engine up: 20.10.24" in run.said
