"""The self-test's host side without an engine: the judges, the weak container's kwargs, the
probe server, the protected-paths config, and the probes module run here on the host."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from flowerbox.box.options import BoxOptions
from flowerbox.box.spec import PROTECTED, BoxSpec, agent_kwargs, gateway_kwargs, protected_paths
from flowerbox.errors import ConfigError
from flowerbox.selftest.controls import ALL_WEAK, VARIANTS, Where, control_named, weaken
from flowerbox.selftest.kernel import host_process
from flowerbox.selftest.probes import PROBES
from flowerbox.selftest.runner import ProbeServer, hand_over, run_box
from flowerbox.selftest.sockets import listening, mount_points, walk
from flowerbox.selftest.syscalls import ARGUMENTS
from flowerbox.selftest.tampering import _parents
from flowerbox.selftest.verdicts import HOST_CHECKS, ZERO_CAPS, Seen, judge, judge_host

TOKEN = "t0k3n"
DENIED = f"flowerbox-selftest-{TOKEN}.invalid"
REFUSED = {"status": 403, "body": "flowerbox egress: denied x:443: not on the allowlist"}
TARGETS = ["127.0.0.1:4000", "localhost:4000", "169.254.169.254:80", "10.0.0.1:443"]
SYSCALLS = tuple(ARGUMENTS)

# What a hardened box reports (the shape flowerbox.selftest.probes prints).
GOOD: dict[str, dict[str, Any]] = {
    "identity": {"uid": 1000, "euid": 1000, "gid": 1000, "groups": [1000]},
    "capabilities": {"CapEff": ZERO_CAPS, "CapBnd": ZERO_CAPS},
    "no_new_privs": {"NoNewPrivs": 1, "prctl": 1},
    "seccomp": {"Seccomp": 2, "machine": "x86_64", "syscalls": dict.fromkeys(SYSCALLS, "EPERM")},
    "read_only_root": {
        "root_mount": ["ro", "relatime"],
        "root_writable": False,
        "tmp_exec": False,
        "writable_mounts": {"/tmp": True, "/ws": False},
    },
    "docker_socket": {
        "engines": [],
        "unopenable": {},
        "others": {"/run/flowerbox/api.sock": "answered: 'HTTP/1.0 404 Not Found'"},
        "entries": 52000,
        "truncated": "",
    },
    "interfaces": {"interfaces": ["lo"]},
    "direct_tcp": {"connected": False, "error": "refused", "route_v4": "ENETUNREACH"},
    "udp": {"sent": True, "error": "", "route_v4": "ENETUNREACH"},
    "raw_socket": {"opened": [], "errors": {}},
    "ipv6_route": {"route_error": "ENETUNREACH"},
    "proxy_denied_name": {
        "proxy": "127.0.0.1:3128",
        "name": DENIED,
        "connect": REFUSED,
        "plain": REFUSED,
    },
    "proxy_internal_targets": {
        "proxy": "127.0.0.1:3128",
        "targets": dict.fromkeys(TARGETS, REFUSED),
    },
    "protected_paths": {
        "writable": [],
        "refused": {".git/hooks": "EROFS", ".git/config": "EROFS"},
        "missing": [],
        "renamed": [],
        "rename_refused": {".git/hooks": "EBUSY", ".git/config": "EBUSY"},
    },
    "protected_parents": {"renamed": [], "refused": {".git": "EBUSY"}},
    "git_redirects": {
        "git": "folder",
        "commondir": "planted",
        "moved": False,
        "replace": "OSError: EBUSY",
    },
    "setuid": {
        "euid": 1000,
        "CapBnd": ZERO_CAPS,
        "su": {"euid": 1000, "CapEff": ZERO_CAPS},
        "sudo": None,
    },
    "survivor": {"process": "started", "container": "no docker socket"},
    "pids_limit": {"tried": 576, "started": 505, "error": "can't start new thread"},
    "kernel": {"btime": 1000, "log": "refused: errno 1", "release": "6.1.0"},
}
# One change per probe that a weak container would show, and the words its FAIL must say.
BAD: dict[str, tuple[dict[str, Any], str]] = {
    "identity": ({"uid": 0, "euid": 0}, "expected your uid 1000"),
    "capabilities": ({"CapEff": "00000000a80425fb"}, "a80425fb"),
    "no_new_privs": ({"NoNewPrivs": 0, "prctl": 0}, "no_new_privs 0"),
    "seccomp": ({"Seccomp": 0}, "no seccomp"),
    "read_only_root": ({"tmp_exec": True}, "/tmp runs"),
    "docker_socket": ({"engines": ["/srv/engine.sock"]}, "engine answers at /srv/engine.sock"),
    "interfaces": ({"interfaces": ["eth0", "lo"]}, "eth0"),
    "direct_tcp": ({"route_v4": ""}, "IPv4 route"),
    "udp": ({}, "reached the host"),  # the host's probe server got the datagram
    "raw_socket": ({"opened": ["AF_INET/SOCK_RAW/ICMP"]}, "ICMP"),
    "ipv6_route": ({"route_error": ""}, "IPv6 route"),
    "proxy_denied_name": ({"plain": {"status": 502, "body": "bad gateway"}}, "plain: 502"),
    "proxy_internal_targets": (
        {"targets": {**dict.fromkeys(TARGETS, REFUSED), "127.0.0.1:4000": {"status": 200}}},
        "127.0.0.1:4000",
    ),
    "protected_paths": ({"writable": [".git/hooks"]}, ".git/hooks"),
    "protected_parents": ({"renamed": [".git"]}, "renamed inside"),
    "git_redirects": ({"moved": True, "replace": "replaced by a folder"}, "moved away"),
    "setuid": ({"su": {"euid": 0, "CapEff": ZERO_CAPS}}, "euid 0"),
    "survivor": ({}, "left behind"),  # the host found a survivor
    "pids_limit": ({"started": 576}, "no limit"),
    # the spec asked for gVisor (seen below), the host's kernel answered
    "kernel": ({}, "not gVisor's kernel"),
}


RUNC_INIT = {"argv0": "/sbin/docker-init", "uid": 1000, "seccomp": 2}  # the box's own init
SENTRY = {"argv0": "runsc-sandbox", "uid": 65534, "seccomp": 2, "platform": "ptrace"}


def seen(**overrides: Any) -> Seen:
    egress = [
        {"host": DENIED, "port": 443, "decision": "deny"},
        {"host": DENIED, "port": 80, "decision": "deny"},
        *({"host": t.rpartition(":")[0], "decision": "deny"} for t in TARGETS),
    ]
    return Seen(
        **{
            "uid": 1000,
            "gid": 1000,
            "pids_limit": 512,
            "token": TOKEN,
            "egress": egress,
            "host_btime": 1000,
            "host_process": RUNC_INIT,
            **overrides,
        }
    )


def output(observations: dict[str, dict[str, Any]]) -> str:
    lines = [json.dumps({"probe": name, **o}) for name, o in observations.items()]
    return "\n".join(["some noise from the relay", *lines])


def test_a_hardened_box_passes_every_probe() -> None:
    verdicts = judge(output(GOOD), seen())
    assert [v.probe for v in verdicts] == list(PROBES)
    assert [v for v in verdicts if not v.ok] == []


@pytest.mark.parametrize("probe", PROBES)
@pytest.mark.english
def test_each_probe_fails_on_what_a_weak_container_shows(probe: str) -> None:
    change, words = BAD[probe]
    observations = {**GOOD, probe: {**GOOD[probe], **change}}
    host = seen(
        received=[f"udp {TOKEN}"] if probe == "udp" else [],
        survivors=["container flowerbox-survivor-x"] if probe == "survivor" else [],
        runtime="runsc" if probe == "kernel" else "runc",
    )
    [verdict] = [v for v in judge(output(observations), host) if v.probe == probe]
    assert not verdict.ok and words in verdict.why, verdict
    others = [v for v in judge(output(observations), host) if v.probe != probe]
    assert all(v.ok for v in others)  # one weakness fails one probe, not its neighbours


CHINESE = re.compile("[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@pytest.mark.parametrize("probe", PROBES)
def test_each_verdict_is_said_in_the_runs_language(
    probe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under zh (the suite's), a probe's PASS and its FAIL say why in Chinese, and the same
    judgement under en is the English line docs/selftest.md shows."""
    change, words = BAD[probe]
    weak = {**GOOD, probe: {**GOOD[probe], **change}}
    host = seen(
        received=[f"udp {TOKEN}"] if probe == "udp" else [],
        survivors=["container flowerbox-survivor-x"] if probe == "survivor" else [],
        runtime="runsc" if probe == "kernel" else "runc",
    )

    def said() -> tuple[str, str]:
        [passed] = [v for v in judge(output(GOOD), seen()) if v.probe == probe]
        [failed] = [v for v in judge(output(weak), host) if v.probe == probe]
        assert passed.ok and not failed.ok
        return passed.why, failed.why

    zh = said()
    monkeypatch.setenv("FLOWER_LANG", "en")
    en = said()
    assert all(CHINESE.search(why) for why in zh), zh
    assert words in en[1] and zh[0] != en[0] and zh[1] != en[1]
    assert not any(CHINESE.search(why) for why in en), en


def test_the_silent_broken_and_unreported_are_said_in_chinese() -> None:
    observations = {k: v for k, v in GOOD.items() if k != "seccomp"}
    observations["udp"] = {"broken": "OSError: boom"}
    failed = {v.probe: v.why for v in judge(output(observations), seen()) if not v.ok}
    assert failed == {"seccomp": "没有观察结果：探针没有报告", "udp": "探针出错：OSError: boom"}
    host = judge_host("", {}, forged="20000101-000000-abcdef")
    assert [v.why for v in host] == ["主机一侧没有报告：没有观察结果"] * len(HOST_CHECKS)


@pytest.mark.english
def test_silence_and_a_broken_probe_fail() -> None:
    observations = {k: v for k, v in GOOD.items() if k != "seccomp"}
    observations["udp"] = {"broken": "OSError: boom"}
    failed = {v.probe: v.why for v in judge(output(observations), seen()) if not v.ok}
    assert failed == {
        "seccomp": "no observation: the probe did not report",
        "udp": "the probe broke: OSError: boom",
    }


def test_the_host_side_catches_what_the_box_cannot_see() -> None:
    failed = {
        v.probe
        for v in judge(
            output(GOOD),
            seen(
                received=[f"direct_tcp {TOKEN}", f"proxied {TOKEN}"],
                changed=[".git/config"],
                egress=[],  # the proxy refused but logged nothing
            ),
        )
        if not v.ok
    }
    assert failed == {
        "direct_tcp",
        "proxy_internal_targets",
        "protected_paths",
        "proxy_denied_name",
    }


@pytest.mark.english
def test_root_is_said_plainly_when_flowerbox_itself_runs_as_root() -> None:
    observations = {
        **GOOD,
        "identity": {"uid": 0, "euid": 0, "gid": 0, "groups": [0]},
        "setuid": {"euid": 0, "CapBnd": ZERO_CAPS, "su": None, "sudo": None},
    }
    verdicts = {v.probe: v for v in judge(output(observations), seen(uid=0, gid=0))}
    assert verdicts["identity"].ok and "flowerbox runs as root" in verdicts["identity"].why
    assert verdicts["setuid"].ok  # uid 0 already, and su gained no capability


def spec(tmp_path: Path) -> BoxSpec:
    ws = tmp_path / "ws"
    (ws / ".git" / "objects").mkdir(parents=True)
    shadow = tmp_path / "shadow-git"  # the box's own .git (flowerbox.box.gitshadow)
    (shadow / "hooks").mkdir(parents=True)
    (shadow / "config").write_text("[core]\n")
    return BoxSpec(
        image="flowerbox:dev",
        workspace=ws,
        run_dir=ws / "runs",
        home=ws / "runs" / "home",
        socket_dir=tmp_path / "s",
        secrets_dir=tmp_path / "k",
        state_dir=tmp_path / "state",
        uid=1000,
        gid=1000,
        command=("python", "-m", "flowerbox.selftest.probes"),
        run_id="r1",
        git="dir",
        shadow_git=shadow,
        git_objects=ws / ".git" / "objects",
    )


def where(box: BoxSpec) -> Where:
    return Where(
        workspace=box.workspace,
        protected=(box.workspace / ".git/hooks", box.workspace / ".git/config"),
        docker_socket="/var/run/docker.sock",
        denied_name=DENIED,
    )


def test_the_negative_control_loosens_every_restriction_and_moves_the_relay(
    tmp_path: Path,
) -> None:
    box = spec(tmp_path)
    strong = agent_kwargs(box)
    protected = where(box).protected  # where the box sees them (the shadow's copies, ro)
    binds = {b["bind"]: b["mode"] for b in strong["volumes"].values()}
    assert all(binds[str(path)] == "ro" for path in protected)
    assert str(box.workspace / ".git") in binds  # the box's own gitdir
    weak = weaken(strong, where(box))
    assert weak["user"] == "0:0" and weak["network_mode"] == "host"
    assert weak["security_opt"] == ["seccomp=unconfined"] and not weak["read_only"]
    assert not {"cap_drop", "tmpfs", "pids_limit"} & set(weak)
    weak_binds = {b["bind"] for b in weak["volumes"].values()}
    assert not {str(path) for path in protected} & weak_binds
    assert str(box.workspace / ".git") not in weak_binds  # the user's .git, unprotected
    assert weak["volumes"]["/var/run/docker.sock"]["bind"] == "/var/run/docker.sock"
    [relay] = [arg for arg in weak["command"] if arg.endswith("/api.sock")]
    port = relay.split("=")[0].rpartition(":")[2]
    assert port != "8080" and weak["environment"]["ANTHROPIC_BASE_URL"].endswith(f":{port}")
    assert strong["user"] == "1000:1000"  # the box's own kwargs are left alone
    permissive = ALL_WEAK.spec(box, where(box))
    assert {"127.0.0.1", "localhost", DENIED} <= set(permissive.allow)


def test_each_variant_changes_one_thing_of_the_agents_container(tmp_path: Path) -> None:
    """Every variant's kwargs differ from the real box's in the keys its property lives in,
    and only there (the proxy variants change the gateway's allowlist instead)."""
    box = spec(tmp_path)
    strong = agent_kwargs(box)
    changed = {}
    for name, control in VARIANTS.items():
        weak = control.agent(strong, where(box))
        keys = {k for k in {*strong, *weak} if strong.get(k) != weak.get(k)}
        claimed = control.spec(box, where(box))
        if claimed.allow != box.allow:
            keys.add("allow")
        if claimed.runtime != box.runtime:  # a spec that claims another kernel than it gets
            keys.add("runtime")
        changed[name] = keys
    assert changed == {
        "root_user": {"user", "cap_add"},
        "extra_group": {"group_add"},
        "cap_add": {"cap_add"},
        "cap_net_raw": {"cap_add"},
        "new_privileges": {"security_opt"},
        "seccomp_allow_all": {"security_opt"},
        "writable_root": {"read_only"},
        "tmp_exec": {"tmpfs"},
        "engine_socket": {"volumes"},
        "engine_reachable": {"volumes", "group_add", "security_opt"},
        "host_network": {"network_mode", "command", "environment"},
        "protected_writable": {"volumes"},
        "parents_writable": set(),  # this box protects nothing below a folder but .git
        "users_gitdir": {"volumes"},
        "no_pids_limit": {"pids_limit"},
        "claims_runsc": {"runtime"},
        "proxy_allows_name": {"allow"},
        "proxy_allows_loopback": {"allow"},
    }
    # Every probe has a variant that fails it but raw_socket (the all-weak control shows it
    # failing): a usable raw socket needs CAP_NET_RAW in effect, which only root gets (and root
    # already fails identity).
    uncovered = set(PROBES) - set().union(*(c.fails for c in VARIANTS.values()))
    assert uncovered == {"raw_socket"}


def test_the_probe_tries_every_folder_above_a_protected_path_once() -> None:
    names = [".git/hooks", ".git/config", "Dockerfile", ".github/workflows/ci.yml"]
    assert _parents(names) == [".git", ".github", ".github/workflows"]


def test_the_socket_walk_finds_sockets_once_and_skips_pseudo_filesystems(tmp_path: Path) -> None:
    import socket as sockets_module

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "proc").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")  # not followed: found once, by its path
    made = []
    for path in (tmp_path / "a" / "b" / "engine.sock", tmp_path / "proc" / "hidden.sock"):
        sock = sockets_module.socket(sockets_module.AF_UNIX)
        sock.bind(str(path))
        made.append(sock)
    try:
        found = walk(str(tmp_path), skip={str(tmp_path / "proc")})
        assert found.sockets == [str(tmp_path / "a" / "b" / "engine.sock")]
        assert not found.truncated
        assert walk(str(tmp_path), skip=set(), max_entries=2).truncated
    finally:
        for sock in made:
            sock.close()


def test_mountinfo_and_net_unix_are_read_as_the_kernel_writes_them() -> None:
    mountinfo = (
        "22 1 0:21 / / ro,relatime - overlay overlay rw\n"
        "23 22 0:22 / /proc rw,nosuid - proc proc rw\n"
        "24 22 8:1 /x /my\\040project rw - ext4 /dev/sda1 rw\n"
        "25 22 0:23 / /sys ro - sysfs sysfs ro\n"
    )
    assert {point for point, pseudo in mount_points(mountinfo).items() if pseudo} == {
        "/proc",
        "/sys",
    }
    net_unix = (
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "00: 00000002 00000000 00010000 0001 01 5585 /var/run/docker.sock\n"
        "00: 00000002 00000000 00000000 0002 01 5583 @dgram\n"
        "00: 00000002 00000000 00010000 0001 01 5584 @engine\n"
        "00: 00000003 00000000 00000000 0001 03 5586\n"
    )
    assert listening(net_unix) == ["/var/run/docker.sock", "@engine"]


def test_the_probe_server_records_tcp_lines_and_datagrams() -> None:
    with ProbeServer() as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"direct_tcp abc\n")
            assert sock.recv(64).startswith(b"flowerbox-probe-server")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(b"udp abc", ("127.0.0.1", server.udp_port))
        for _ in range(100):
            if len(server.received) == 2:
                break
            time.sleep(0.02)
    assert sorted(server.received) == ["direct_tcp abc", "udp abc"]


def test_the_probes_module_prints_one_json_line_per_probe_asked() -> None:
    with ProbeServer() as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "flowerbox.selftest.probes",
                "--server",
                f"127.0.0.1:{server.port}",
                "--udp",
                f"127.0.0.1:{server.udp_port}",
                "--token",
                TOKEN,
                "--marker",
                "m",
                "--denied-name",
                DENIED,
                *("--only", "identity", "--only", "direct_tcp", "--only", "interfaces"),
            ],
            env={"PATH": "/usr/bin:/bin", "HTTPS_PROXY": "http://127.0.0.1:9"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["probe"] for line in lines] == ["identity", "direct_tcp", "interfaces"]
    assert lines[0]["uid"] == os.getuid()
    # Here on the host the loopback server IS reachable: the probe sees it and says so.
    assert lines[1]["connected"] and lines[1]["reply"] == "flowerbox-probe-server"
    assert f"direct_tcp {TOKEN}" in server.received


def test_a_workspace_adds_protected_paths_in_its_config(tmp_path: Path) -> None:
    assert protected_paths(tmp_path) == PROTECTED
    config = tmp_path / ".flowerbox" / "config.toml"
    config.parent.mkdir()
    config.write_text('protect = ["deploy/", "Makefile", ".git/hooks"]\n')
    assert protected_paths(tmp_path) == (*PROTECTED, "deploy", "Makefile")


@pytest.mark.english
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('protect = ["/etc/passwd"]', "relative to the workspace"),
        ('protect = ["../elsewhere"]', "no leading / and no .."),
        ('protect = "Makefile"', "must be a list of paths"),
        ("protect = [", "cannot read"),
    ],
)
def test_a_bad_protect_entry_is_refused_with_the_fix(tmp_path: Path, text: str, words: str) -> None:
    config = tmp_path / ".flowerbox" / "config.toml"
    config.parent.mkdir()
    config.write_text(text)
    with pytest.raises(ConfigError, match=words.replace(".", r"\.").replace("/", "/")):
        protected_paths(tmp_path)


def test_doctor_asks_for_the_gateways_health_alone() -> None:
    up = {"gateway_health": {"status": 200, "body": '{"upstream": "reachable"}'}}
    down = {"gateway_health": {"status": 503, "body": '{"upstream": "unreachable"}'}}
    [ok] = judge(output({**GOOD, **up}), seen(), ("gateway_health",))
    [bad] = judge(output(down), seen(), ("gateway_health",))
    assert ok.ok and not bad.ok and "503" in bad.why and "unreachable" in bad.why
    assert ok.why == "网关已启动，它的上游可以连通" and bad.why.startswith("健康检查：503")  # zh


# More ways each property is seen broken: (probe, change of its observation, host overrides,
# words the FAIL must say).
MORE_BAD = [
    ("identity", {"groups": [105, 1000]}, {}, "supplementary groups [105, 1000]"),
    ("identity", {"gid": 0, "groups": [0]}, {}, "expected your gid 1000"),
    (
        "seccomp",
        {"syscalls": {**dict.fromkeys(ARGUMENTS, "EPERM"), "keyctl": "ENOTSUP", "unshare": "ok"}},
        {},
        "reached the kernel: unshare (ok), keyctl (ENOTSUP)",
    ),
    ("seccomp", {"machine": "riscv64", "syscalls": None}, {}, "no syscall table for riscv64"),
    ("read_only_root", {"root_mount": ["rw", "relatime"]}, {}, "/ is mounted rw"),
    ("read_only_root", {"root_writable": True}, {}, "took a write"),
    ("docker_socket", {"unopenable": {"/srv/engine.sock": "unopenable"}}, {}, "/srv/engine.sock"),
    ("docker_socket", {"truncated": "stopped after 1000000 entries"}, {}, "cut short"),
    ("udp", {"route_v4": ""}, {}, "would route a datagram out"),
    ("protected_paths", {"renamed": [".git/config"]}, {}, "renamed inside: .git/config"),
    ("git_redirects", {}, {"repo_changed": [".git/commondir appeared"]}, "reached your repo"),
    ("setuid", {"su": {"euid": 1000, "CapEff": "0000000000000002"}}, {}, "CapEff 0000000000000002"),
    (
        "git_redirects",
        {"git": "file", "file_refused": "", "file_rename_refused": "EBUSY"},
        {},
        "linked worktree) can be rewritten",
    ),
]


@pytest.mark.parametrize(("probe", "change", "host", "words"), MORE_BAD)
@pytest.mark.english
def test_the_property_not_a_symptom(
    probe: str, change: dict[str, Any], host: dict[str, Any], words: str
) -> None:
    observations = {**GOOD, probe: {**GOOD[probe], **change}}
    verdicts = judge(output(observations), seen(**host))
    [verdict] = [v for v in verdicts if v.probe == probe]
    assert not verdict.ok and words in verdict.why, verdict
    assert all(v.ok for v in verdicts if v.probe != probe)


@pytest.mark.english
def test_a_pass_says_what_it_cannot_claim() -> None:
    verdicts = {v.probe: v.why for v in judge(output(GOOD), seen())}
    assert "writable and executable by design: /ws" in verdicts["read_only_root"]
    assert "refused with EPERM: unshare, keyctl" in verdicts["seccomp"]
    assert "not in your repository" in verdicts["git_redirects"]


def test_su_holding_any_capability_fails_even_when_the_caller_holds_it_too() -> None:
    """Root with a capability (the root_user control): su runs with it, so setuid FAILs
    there as it does in the all-weak control; it PASSes only where su holds nothing."""
    own = "0000000000000002"
    setuid = {"euid": 0, "CapEff": own, "CapBnd": own, "su": {"euid": 0, "CapEff": own}}
    verdicts = judge(output({**GOOD, "setuid": setuid}), seen())
    assert [v.ok for v in verdicts if v.probe == "setuid"] == [False], verdicts


@pytest.mark.parametrize(
    ("base_url", "git", "on_loopback"),
    [
        (None, True, False),  # the real API: the gateway takes a network of its own
        ("http://127.0.0.1:4000", True, True),  # a local upstream: the host's network
        (None, False, False),
    ],
)
def test_the_selftest_box_is_the_box_a_run_gets(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    base_url: str | None,
    git: bool,
    on_loopback: bool,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-the-users-real-key")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    if base_url is None:
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
    ws = tmp_path / "ws"
    ws.mkdir()
    if git:
        subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    prepared = run_box(
        BoxOptions(workspace=ws, image="img"), placeholder_upstream="http://127.0.0.1:9"
    )
    try:
        hand_over(prepared, placeholder_upstream="http://127.0.0.1:9")
        spec = prepared.spec
        assert spec.upstream_on_loopback is on_loopback
        gateway = gateway_kwargs(spec)
        assert gateway["network_mode"] == ("host" if on_loopback else "bridge")
        # an isolated run's workbench, mounted as a run's is (only a run in git is isolated)
        workbench = ws.parent / ".flower-ws"
        assert (spec.workbench == workbench) is git
        assert (str(workbench) in agent_kwargs(spec)["volumes"]) is git
        credentials = (spec.secrets_dir / "credentials.env").read_text()
        assert "sk-the-users-real-key" not in credentials and "sk-flowerbox-selftest" in credentials
    finally:
        prepared.cleanup()
    assert os.environ["ANTHROPIC_API_KEY"] == "sk-the-users-real-key"  # restored


@pytest.mark.english
def test_a_variant_is_named_and_joined_network_names_its_container() -> None:
    assert control_named("seccomp_allow_all") is VARIANTS["seccomp_allow_all"]
    joined = control_named("joined_network:fbx-ns")
    assert joined.fails == {"interfaces", "direct_tcp", "udp"}
    kwargs = joined.agent({"network_mode": "none"}, where_nothing())
    assert kwargs == {"network_mode": "container:fbx-ns"}
    for bad in ("joined_network", "nope", "cap_add:x"):
        with pytest.raises(ConfigError, match="use one of root_user, extra_group"):
            control_named(bad)


def where_nothing() -> Where:
    return Where(workspace=Path("/ws"), protected=(), docker_socket="", denied_name=DENIED)


# What a gVisor box reports: facts read differently there (no NoNewPrivs line in its status,
# no profile loaded in its kernel, its own boot time, its own kernel log).
GVISOR: dict[str, dict[str, Any]] = {
    **GOOD,
    "no_new_privs": {"NoNewPrivs": 0, "prctl": 1},
    "seccomp": {
        "Seccomp": 0,
        "machine": "x86_64",
        "syscalls": {**dict.fromkeys(SYSCALLS, "EPERM"), "unshare": "ok", "keyctl": "EACCES"},
    },
    "kernel": {"btime": 1800, "log": "<6>[0.0] Starting gVisor...", "release": "4.4.0"},
}


@pytest.mark.english
def test_a_gvisor_box_passes_every_probe_from_the_hosts_facts() -> None:
    verdicts = {
        v.probe: v for v in judge(output(GVISOR), seen(runtime="runsc", host_process=SENTRY))
    }
    assert [v for v in verdicts.values() if not v.ok] == []
    assert "gVisor" in verdicts["kernel"].why and "runsc-sandbox" in verdicts["kernel"].why
    assert "(ptrace platform)" in verdicts["kernel"].why
    assert "seccomp mode 2" in verdicts["seccomp"].why


@pytest.mark.english
def test_the_kernel_is_judged_on_facts_not_on_what_the_box_says() -> None:
    """A box that says gVisor everywhere it can (its log, its release) but runs on the host's
    kernel: the host sees its own init and its own boot time, so the probe FAILs; the same box
    on runc, asked for runc, PASSes and says so."""
    claims = seen(runtime="runsc")  # runc underneath: the box's init, the host's boot time
    fake = {**GVISOR, "kernel": {**GVISOR["kernel"], "btime": 1000}}
    failed = {v.probe: v.why for v in judge(output(fake), claims) if not v.ok}
    assert set(failed) == {"kernel", "seccomp"}  # no gVisor: mode 0 is no filter at all
    assert "docker-init" in failed["kernel"] and "not gVisor's kernel" in failed["kernel"]
    # The sandbox's process alone is not enough: its kernel must have booted on its own.
    own_boot = {v.probe: v for v in judge(output(fake), seen(runtime="runsc", host_process=SENTRY))}
    assert not own_boot["kernel"].ok
    [runc] = [v for v in judge(output(GOOD), seen()) if v.probe == "kernel"]
    assert runc.ok and "runc, as asked" in runc.why
    [surprise] = [
        v for v in judge(output(GVISOR), seen(host_process=SENTRY)) if v.probe == "kernel"
    ]
    assert not surprise.ok and "runc was asked for" in surprise.why


@pytest.mark.english
def test_gvisors_sandbox_without_its_seccomp_filter_fails_seccomp() -> None:
    host = seen(runtime="runsc", host_process={**SENTRY, "seccomp": 0})
    [verdict] = [v for v in judge(output(GVISOR), host) if v.probe == "seccomp"]
    assert not verdict.ok and "seccomp mode 0" in verdict.why


def test_under_runsc_a_runc_only_variant_leaves_gvisor_and_fails_the_kernel_too(
    tmp_path: Path,
) -> None:
    box = replace(spec(tmp_path), runtime="runsc")
    strong = agent_kwargs(box)
    assert strong["runtime"] == "runsc"
    assert strong["ulimits"] == [{"name": "nproc", "soft": 512, "hard": 512}]
    seccomp = VARIANTS["seccomp_allow_all"].under("runsc")
    assert seccomp.fails == {"seccomp", "kernel"}
    weak = seccomp.agent(strong, where(box))
    assert weak["runtime"] == "runc" and "ulimits" not in weak
    assert weak["pids_limit"] == 512  # the agent's limit, where runc takes it
    assert VARIANTS["seccomp_allow_all"].under("runc") is VARIANTS["seccomp_allow_all"]
    assert VARIANTS["cap_add"].under("runsc") is VARIANTS["cap_add"]  # gVisor honours it
    claims = VARIANTS["claims_runsc"]
    assert claims.fails == {"kernel"}
    assert claims.spec(replace(box, runtime="runc"), where(box)).runtime == "runsc"
    assert claims.agent(strong, where(box))["runtime"] == "runc"
    assert ALL_WEAK.spec(box, where(box)).runtime == "runsc"  # claims it, and runs runc:
    assert weaken(strong, where(box))["runtime"] == "runc"  # so the kernel probe FAILs too
    no_limit = VARIANTS["no_pids_limit"].agent(strong, where(box))
    assert not {"pids_limit", "ulimits"} & set(no_limit)


def exec_done(pid: int) -> None:
    """Wait (at most 10 s) until `pid` runs the shell it was started with."""
    deadline = time.monotonic() + 10
    cmdline = Path(f"/proc/{pid}/cmdline")
    while not cmdline.read_bytes().startswith(b"/bin/sh\0") and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.english
def test_the_sandboxs_platform_is_read_from_its_argv_on_the_host() -> None:
    """How gVisor traps the agent's system calls is reported from the host's process table
    (the flag the engine gave the sandbox), never from the box."""
    for flags, platform in ((["--platform=kvm", "--network=none"], "kvm"), ([], "")):
        # a shell that stays (`; :`), with the flags as its positional arguments
        with subprocess.Popen(["/bin/sh", "-c", "sleep 60; :", "runsc-sandbox", *flags]) as box:
            try:
                exec_done(box.pid)  # until then its argv is the forking Python's
                assert host_process(box.pid)["platform"] == platform
            finally:
                box.kill()
    default = {**SENTRY, "platform": ""}
    [kernel] = [
        v
        for v in judge(output(GVISOR), seen(runtime="runsc", host_process=default))
        if v.probe == "kernel"
    ]
    assert kernel.ok and "(runsc's default platform)" in kernel.why
