"""What isolation a run's box actually had, read back from the engine's own record of the
agent's container (`docker inspect`), not from what flowerbox asked for: a daemon default, a
plugin or a wrapper that changed a setting shows here. Recorded in the run's meta (`box`),
shown by `flowerbox ps --json` and summed up in the provenance note.

    facts = box_facts(container.attrs)
    summary(facts)  # 'uid 1000:1000, groups none, caps none, seccomp default, ...'
"""

from __future__ import annotations

from typing import Any


def box_facts(attrs: dict[str, Any]) -> dict[str, Any]:
    """The isolation facts of a container from its inspect record."""
    config = attrs.get("Config") or {}
    host = attrs.get("HostConfig") or {}
    options = [str(option) for option in host.get("SecurityOpt") or []]
    profiles = [o.split("=", 1)[1] for o in options if o.startswith(("seccomp=", "seccomp:"))]
    seccomp = "default" if not profiles else "unconfined" if "unconfined" in profiles else "custom"
    return {
        "user": config.get("User") or "root",
        "groups": sorted(str(group) for group in host.get("GroupAdd") or []),
        "cap_drop": sorted(host.get("CapDrop") or []),
        "cap_add": sorted(host.get("CapAdd") or []),
        "privileged": bool(host.get("Privileged")),
        "seccomp": seccomp,
        "no_new_privileges": any(o.startswith("no-new-privileges") for o in options),
        "network": host.get("NetworkMode"),
        "read_only_root": bool(host.get("ReadonlyRootfs")),
        "pids_limit": host.get("PidsLimit"),
        "memory": host.get("Memory"),
        "runtime": host.get("Runtime") or "runc",  # runsc: gVisor's kernel, not the host's
        "host_pid": (attrs.get("State") or {}).get("Pid"),  # its first process, on the host
        "read_only_mounts": sorted(
            str(mount.get("Destination"))
            for mount in attrs.get("Mounts") or []
            if not mount.get("RW")
        ),
    }


def summary(facts: dict[str, Any] | None) -> str:
    """One line for a note: what the agent ran as and what held it."""
    if not facts:
        return "unknown"
    caps = (
        "none"
        if "ALL" in facts.get("cap_drop", []) and not facts.get("cap_add")
        else ("added: " + ",".join(facts.get("cap_add", [])) if facts.get("cap_add") else "default")
    )
    parts = [
        f"uid {facts.get('user')}",
        f"groups {','.join(facts.get('groups', [])) or 'none'}",
        f"caps {caps}",
        "privileged" if facts.get("privileged") else "",
        f"seccomp {facts.get('seccomp')}",
        "no-new-privileges" if facts.get("no_new_privileges") else "new privileges allowed",
        f"network {facts.get('network')}",
        f"runtime {facts.get('runtime', 'runc')}",
        "read-only root" if facts.get("read_only_root") else "writable root",
        f"{len(facts.get('read_only_mounts', []))} read-only mounts",
    ]
    return ", ".join(part for part in parts if part)
