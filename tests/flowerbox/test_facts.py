"""flowerbox.box.facts: a run's isolation read from the engine's inspect record, and its summary."""

from __future__ import annotations

from typing import Any

from flowerbox.box.facts import box_facts, summary

HARDENED: dict[str, Any] = {
    "Config": {"User": "1000:1000"},
    "HostConfig": {
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges"],
        "NetworkMode": "none",
        "ReadonlyRootfs": True,
        "PidsLimit": 512,
        "Memory": 4 * 1024**3,
    },
    "Mounts": [
        {"Destination": "/w", "RW": True},
        {"Destination": "/w/Dockerfile", "RW": False},
    ],
}


def test_a_hardened_box_reads_as_hardened() -> None:
    facts = box_facts(HARDENED)
    assert facts["user"] == "1000:1000" and facts["groups"] == [] and facts["cap_add"] == []
    assert (facts["seccomp"], facts["no_new_privileges"]) == ("default", True)
    assert facts["read_only_mounts"] == ["/w/Dockerfile"]
    assert summary(facts) == (
        "uid 1000:1000, groups none, caps none, seccomp default, no-new-privileges, "
        "network none, runtime runc, read-only root, 1 read-only mounts"
    )
    gvisor = box_facts({**HARDENED, "HostConfig": {**HARDENED["HostConfig"], "Runtime": "runsc"}})
    assert gvisor["runtime"] == "runsc" and "runtime runsc" in summary(gvisor)


def test_each_weakening_shows() -> None:
    weak = {
        "Config": {"User": ""},
        "HostConfig": {
            "GroupAdd": ["docker"],
            "CapAdd": ["SYS_ADMIN"],
            "SecurityOpt": ["seccomp=unconfined"],
            "NetworkMode": "host",
            "Privileged": True,
        },
    }
    facts = box_facts(weak)
    line = summary(facts)
    for shown in ("uid root", "groups docker", "caps added: SYS_ADMIN", "privileged"):
        assert shown in line
    for shown in ("seccomp unconfined", "new privileges allowed", "network host", "writable root"):
        assert shown in line
    custom = box_facts({"HostConfig": {"SecurityOpt": ['seccomp={"defaultAction":"x"}']}})
    assert custom["seccomp"] == "custom" and summary(None) == "unknown"
