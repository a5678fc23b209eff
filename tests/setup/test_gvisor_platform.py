"""docker/gvisor-platform.sh decides gVisor's platform at set-up from facts: kvm only where a
trial sandbox boots on the KVM device (a device that is there is no proof: a nested or
paravirtual KVM hangs gVisor's guest), else systrap where runsc has it, else ptrace."""

from __future__ import annotations

from pathlib import Path

from tests.setup.stubs import Run, run_script

CHAR_DEVICE = "/dev/null"  # any character device stands for a KVM device that is there


def decide(tmp_path: Path, *flags: str, device: str = CHAR_DEVICE, root: bool = True) -> Run:
    env = {"FLOWERBOX_KVM_DEVICE": device, "FLOWERBOX_KVM_TRIAL_S": "1"}
    run = run_script("gvisor-platform.sh", tmp_path, flags=flags, root=root, env=env)
    assert run.code == 0, run.said
    return run


def kvm_trials(run: Run) -> list[str]:
    return [call for call in run.calls if call.startswith("runsc --platform=kvm")]


def test_kvm_where_a_trial_sandbox_boots_on_the_device(tmp_path: Path) -> None:
    run = decide(tmp_path, "kvm-boots", "systrap")
    assert run.printed == "kvm\n"
    assert "platform kvm: a trial sandbox booted on /dev/null" in run.said
    assert kvm_trials(run) == [
        "runsc --platform=kvm --platform_device_path=/dev/null --network=none do /bin/true"
    ]


def test_a_device_whose_trial_hangs_falls_back_within_the_trial_time(tmp_path: Path) -> None:
    run = decide(tmp_path, "kvm-hangs")
    assert run.printed == "ptrace\n"
    assert "no trial sandbox booted on it within 1 s" in run.said
    assert "platform ptrace (this runsc has no systrap" in run.said


def test_a_device_that_refuses_falls_back_to_systrap_where_runsc_has_it(tmp_path: Path) -> None:
    run = decide(tmp_path, "systrap")  # the trial sandbox exits non-zero
    assert run.printed == "systrap\n"
    assert "not the kvm platform" in run.said


def test_no_device_no_trial(tmp_path: Path) -> None:
    run = decide(tmp_path, "kvm-boots", device=str(tmp_path / "no-kvm"))
    assert run.printed == "ptrace\n"
    assert "no KVM device" in run.said
    assert kvm_trials(run) == []


def test_not_root_no_trial_and_not_kvm(tmp_path: Path) -> None:
    run = decide(tmp_path, "kvm-boots", root=False)
    assert run.printed == "ptrace\n"
    assert "only root can try a sandbox on it" in run.said
    assert kvm_trials(run) == []
