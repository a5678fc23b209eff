"""The egress policy as plain calls: which target passes, on its name alone and then on what
it resolves to. No sockets, no DNS."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import Prepared, prepare
from flowerbox.box.spec import agent_kwargs, gateway_kwargs
from flowerbox.cli.app import app
from flowerbox.errors import ConfigError, EgressError
from flowerbox.sidecar.egress import PRESETS, Policy, address_kind, parse_host

ALLOW = [
    "pypi.org",
    "*.GitHubUserContent.com",
    "Example.TEST.",
    "203.0.113.7",
    "localhost",
    "fd00::5",
]


@pytest.mark.parametrize(
    ("target", "allowed", "reason"),
    [
        # exact, case-insensitive, one trailing dot ignored
        ("pypi.org", True, "listed: pypi.org"),
        ("PyPI.ORG.", True, "listed: pypi.org"),
        ("example.test", True, "listed: example.test"),
        ("files.pypi.org", False, "not in the allowlist (--allow files.pypi.org to permit)"),
        ("evilpypi.org", False, "not in the allowlist"),
        ("pypi.org.evil", False, "not in the allowlist"),
        # a wildcard covers subdomains only, never the apex or look-alikes
        ("raw.githubusercontent.com", True, "listed: *.githubusercontent.com"),
        ("a.b.githubusercontent.com", True, "listed: *.githubusercontent.com"),
        ("githubusercontent.com", False, "not in the allowlist"),
        ("evil-githubusercontent.com", False, "not in the allowlist"),
        ("githubusercontent.com.evil", False, "not in the allowlist"),
        # IP literals: only a listed address, whatever its range
        ("203.0.113.7", True, "listed: 203.0.113.7"),
        ("1.1.1.1", False, "an IP address (public) not in the allowlist (--allow 1.1.1.1"),
        ("[2606:4700::1111]", False, "an IP address (public) not in the allowlist"),
        ("127.0.0.1", False, "an IP address (loopback)"),
        ("[::1]", False, "an IP address (loopback)"),
        ("[::ffff:127.0.0.1]", False, "an IP address (loopback)"),
        ("169.254.1.1", False, "an IP address (link-local)"),
        ("[fe80::1]", False, "an IP address (link-local)"),
        ("169.254.169.254", False, "an IP address (cloud metadata)"),
        ("[fd00:ec2::254]", False, "an IP address (cloud metadata)"),
        ("10.0.0.1", False, "an IP address (private)"),
        ("172.16.5.4", False, "an IP address (private)"),
        ("192.168.1.1", False, "an IP address (private)"),
        ("[fd12::1]", False, "an IP address (unique-local)"),
        ("[fd00::5]", True, "listed: fd00::5"),
        ("100.64.0.1", False, "an IP address (not public)"),
        ("0.0.0.0", False, "an IP address (loopback)"),
        ("198.18.0.1", False, "an IP address (private)"),
        ("[ff02::1]", False, "an IP address (not public)"),
        # names of the machine itself and of cloud metadata: only an exact entry
        ("localhost", True, "listed: localhost"),
        ("app.localhost", False, "a loopback name not in the allowlist; a wildcard never"),
        ("metadata.google.internal", False, "a cloud metadata name not in the allowlist"),
        # a name that is an address in disguise
        ("127.1", False, "a numeric name that reads as an IP address"),
    ],
)
@pytest.mark.english
def test_the_name_alone_decides_before_any_lookup(target: str, allowed: bool, reason: str) -> None:
    decision = Policy.parse(ALLOW).check_target(parse_host(target))
    assert decision.allowed is allowed
    assert decision.reason.startswith(reason) if allowed else reason in decision.reason


def test_a_wildcard_never_covers_the_metadata_or_loopback_names() -> None:
    policy = Policy.parse(["*.internal", "*.localhost", "*.goog"])
    for name in ("metadata.google.internal", "app.localhost", "metadata.goog"):
        assert not policy.check_target(name).allowed, name
    assert policy.check_target("db.internal").allowed


@pytest.mark.english
def test_an_empty_list_is_no_network_and_says_so() -> None:
    for policy in (Policy.parse([]), Policy.parse(["", " , "])):
        for target in ("pypi.org", "1.1.1.1", "localhost"):
            decision = policy.check_target(parse_host(target))
            assert not decision.allowed and "which is empty: no network" in decision.reason


def ips(*texts: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    return [ipaddress.ip_address(text) for text in texts]


@pytest.mark.parametrize(
    ("resolved", "allowed", "reason"),
    [
        (["151.101.0.223"], True, "resolved to public or listed addresses"),
        (["151.101.0.223", "2a04:4e42::223"], True, ""),
        (["127.0.0.1"], False, "resolves to 127.0.0.1 (loopback), which is not in the allow"),
        (["151.101.0.223", "10.1.2.3"], False, "resolves to 10.1.2.3 (private)"),
        (["169.254.169.254"], False, "(cloud metadata)"),
        (["::ffff:192.168.0.1"], False, "resolves to 192.168.0.1 (private)"),
        (["2002:a00:1::"], False, "(private)"),  # 6to4 around 10.0.0.1
        (["64:ff9b::a9fe:a9fe"], False, "(cloud metadata)"),  # NAT64 around 169.254.169.254
        (["fc00::1"], False, "(unique-local)"),
        (["203.0.113.7"], True, ""),  # listed itself
        ([], False, "resolves to no address"),
    ],
)
@pytest.mark.english
def test_what_an_allowed_name_resolves_to_is_checked_too(
    resolved: list[str], allowed: bool, reason: str
) -> None:
    decision = Policy.parse(ALLOW).check_addresses(ips(*resolved))
    assert decision.allowed is allowed and reason in decision.reason


def test_a_listed_internal_address_opens_that_address_only() -> None:
    policy = Policy.parse(["intranet.test", "10.1.2.3"])
    assert policy.check_addresses(ips("10.1.2.3")).allowed
    assert not policy.check_addresses(ips("10.1.2.4")).allowed
    assert policy.check_target(parse_host("10.1.2.3")).allowed


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_add_exactly_their_documented_names(preset: str) -> None:
    policy = Policy.parse([], [preset])
    assert policy.entries == tuple(sorted(PRESETS[preset]))
    assert all(policy.check_target(name).allowed for name in PRESETS[preset])
    assert not policy.check_target("evil.test").allowed


def test_presets_as_documented() -> None:
    """The preset table in docs/egress.md is what the code allows, domain for domain."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "egress.md").read_text()
    rows = re.findall(r"^\| `([a-z]+)` \| (`.+`) \|$", page, re.M)
    documented = {name: tuple(re.findall(r"`([^`]+)`", cells)) for name, cells in rows}
    assert documented == PRESETS


def test_entries_may_be_comma_separated_and_are_normalized() -> None:
    policy = Policy.parse(["PyPI.org,*.Example.test", "[::1]", "::ffff:10.0.0.1"])
    assert policy.entries == ("*.example.test", "10.0.0.1", "::1", "pypi.org")


@pytest.mark.english
@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("*", "pass --net open"),
        ("https://github.com", "pass a bare host name"),
        ("github.com:443", "pass a bare host name"),
        ("github.com/org", "pass a bare host name"),
        ("10.0.0.0/8", "no scheme, port, path or range"),
        ("*.10.0.0.1", "`*.` takes a domain"),
        ("gith*b.com", "not a valid host name"),
        ("a..b", "not a valid host name"),
        ("-bad.com", "not a valid host name"),
    ],
)
def test_unusable_entries_are_refused_with_what_to_pass(entry: str, message: str) -> None:
    with pytest.raises(EgressError, match="--allow") as caught:
        Policy.parse([entry])
    assert message in str(caught.value)


@pytest.mark.english
def test_an_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(EgressError, match="use one of github, npm, pypi"):
        Policy.parse([], ["pip"])


def test_address_kinds() -> None:
    assert address_kind(ipaddress.ip_address("8.8.8.8")) is None
    assert address_kind(ipaddress.ip_address("2606:4700::1111")) is None
    assert address_kind(ipaddress.ip_address("224.0.0.1")) == "not public"
    assert address_kind(ipaddress.ip_address("100.100.100.200")) == "cloud metadata"


@pytest.mark.parametrize("text", ["", "[pypi.org]", "exa mple.com", "x" * 64 + ".com", "a_b.c%"])
def test_hosts_that_are_neither_names_nor_addresses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a"):
        parse_host(text)


# --- the box's network settings (BoxSpec -> docker kwargs; no engine) -----------------------

PROXY = "http://127.0.0.1:3128"
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "FLOWER_", "CLAUDE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-egress")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    return ws.resolve()


@pytest.fixture
def prepared(repo: Path) -> Iterator[list[Prepared]]:
    made: list[Prepared] = []
    yield made
    for box in made:
        box.cleanup()


def test_by_default_the_agent_leaves_only_through_the_proxy(
    repo: Path, prepared: list[Prepared]
) -> None:
    prepared.append(
        prepare(
            ["go", "x"],
            BoxOptions(workspace=repo, allow=("B.test,*.c.test",), allow_presets=("npm",)),
        )
    )
    spec = prepared[0].spec
    agent, gateway = agent_kwargs(spec), gateway_kwargs(spec)
    assert agent["network_mode"] == "none"
    assert {agent["environment"][name] for name in PROXY_VARS} == {PROXY}
    assert agent["environment"]["NO_PROXY"] == "127.0.0.1,localhost"
    assert "127.0.0.1:3128=/run/flowerbox/proxy.sock" in agent["command"]
    command = gateway["command"]
    assert command[command.index("--proxy-socket") + 1] == "/run/flowerbox/proxy.sock"
    assert command[command.index("--egress-log") + 1] == str(
        spec.state_dir / "gateway" / "egress.jsonl"
    )
    allowed = [command[i + 1] for i, arg in enumerate(command) if arg == "--allow"]
    assert allowed == ["*.c.test", "b.test", "registry.npmjs.org"]
    assert spec.gateway_dir.is_dir() and "extra_hosts" not in gateway


def test_an_empty_allowlist_still_serves_the_proxy_that_denies_everything(
    repo: Path, prepared: list[Prepared]
) -> None:
    prepared.append(prepare(["once", "x"], BoxOptions(workspace=repo, isolate=False)))
    command = gateway_kwargs(prepared[0].spec)["command"]
    assert "--proxy-socket" in command and "--allow" not in command


def test_net_open_gives_the_agent_a_network_and_no_proxy(
    repo: Path, prepared: list[Prepared]
) -> None:
    prepared.append(prepare(["go", "x"], BoxOptions(workspace=repo, net="open")))
    agent, gateway = agent_kwargs(prepared[0].spec), gateway_kwargs(prepared[0].spec)
    assert agent["network_mode"] == "bridge"
    assert not set(PROXY_VARS) & set(agent["environment"])
    assert not any("proxy.sock" in arg for arg in agent["command"])
    assert "--proxy-socket" not in gateway["command"]
    assert "127.0.0.1:8080=/run/flowerbox/api.sock" in agent["command"]  # the API: gateway


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"net": "open", "allow": ["pypi.org"]}, "drop them, or drop --net open"),
        ({"net": "closed"}, "--net 'closed': use one of allowlist, open"),
        ({"allow": ["https://pypi.org"]}, "pass a bare host name"),
        ({"allow_presets": ["pip"]}, "unknown --allow-preset 'pip'"),
    ],
)
def test_bad_network_settings_are_refused_before_anything_is_made(
    repo: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        prepare(["go", "x"], BoxOptions(workspace=repo, **kwargs))  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert not (repo / "runs").exists()


def test_egress_hosts_go_to_the_gateways_hosts_file(
    repo: Path, prepared: list[Prepared], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWERBOX_EGRESS_HOSTS", "Mirror.test=127.0.0.1, v6.test=::1")
    prepared.append(prepare(["go", "x"], BoxOptions(workspace=repo)))
    gateway = gateway_kwargs(prepared[0].spec)
    assert gateway["extra_hosts"] == {"mirror.test": "127.0.0.1", "v6.test": "::1"}
    monkeypatch.setenv("FLOWERBOX_EGRESS_HOSTS", "mirror.test:127.0.0.1")
    with pytest.raises(ConfigError, match="is not name=address"):
        prepare(["go", "x"], BoxOptions(workspace=repo))


def test_the_cli_refuses_a_bad_allow_with_exit_2(repo: Path) -> None:
    result = CliRunner().invoke(app, ["go", "x", "-w", str(repo), "--allow", "*"])
    assert result.exit_code == 2
    assert "--allow '*' would allow everything: pass --net open" in result.output
