"""The egress policy: which targets the agent's proxy lets through. Pure: no sockets, no DNS.

    policy = Policy.parse(["pypi.org", "*.githubusercontent.com"], presets=["npm"])
    policy.check_target(parse_host("PyPI.org"))          # before any lookup
    policy.check_addresses("pypi.org", resolved)         # after it, before any connect

Rules (docs/egress.md has the table):
- Deny by default; an empty policy denies everything (no network).
- A name passes when it is listed exactly (case-insensitive, one trailing dot ignored) or
  matches a `*.x.y` entry, which covers subdomains of x.y only, never x.y itself.
- `localhost`, `*.localhost` and the cloud metadata names pass only when listed exactly: a
  wildcard never covers them.
- An IP literal passes only when that address is listed, whatever its range.
- A name that passed is resolved by the caller; if any address it resolves to is loopback,
  link-local, cloud metadata, private, unique-local or otherwise not public, the target is
  refused unless that very address is listed (no DNS rebinding through an allowed name).
- Ports are not filtered: a listed name is reachable on any port.

Errors: `EgressError` (a ConfigError) for an unusable --allow entry or preset; the message
names it and says what to pass instead.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flower import text, word
from flowerbox.errors import EgressError

__all__ = [
    "PRESETS",
    "Decision",
    "EgressError",
    "Host",
    "IPAddress",
    "Policy",
    "address_kind",
    "parse_host",
    "show",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Host = str | IPAddress  # a normalized name, or an address

# What a common need requires, and nothing more (docs/egress.md lists them).
PRESETS: dict[str, tuple[str, ...]] = {
    "pypi": ("pypi.org", "files.pythonhosted.org"),
    "npm": ("registry.npmjs.org",),
    "github": (
        "github.com",
        "api.github.com",
        "codeload.github.com",
        "raw.githubusercontent.com",
        "objects.githubusercontent.com",
        "release-assets.githubusercontent.com",
    ),
}
# Names that reach the machine itself or a cloud's instance metadata.
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS VPC DNS
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS IMDS over IPv6
    )
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


def show(host: Host) -> str:
    """The host as it appears in a URL authority: IPv6 in brackets."""
    return f"[{host}]" if isinstance(host, ipaddress.IPv6Address) else str(host)


def parse_host(text: str) -> Host:
    """A host from a request or an --allow entry: an address, or a lower-case ASCII name.

    Raises:
        ValueError: not a host name or address (empty, bad characters, a label too long...).
    """
    bracketed = text.startswith("[") and text.endswith("]")
    try:
        return ipaddress.ip_address(text[1:-1] if bracketed else text)
    except ValueError:
        if bracketed:
            raise ValueError(f"{text!r} is not an IPv6 address") from None
    name = text.lower().removesuffix(".")
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise ValueError(f"{text!r} is not a valid host name") from exc
    labels = name.split(".")
    if len(name) > 253 or not all(
        0 < len(label) <= 63 and set(label) <= _LABEL_CHARS and label[0] != "-" != label[-1]
        for label in labels
    ):
        raise ValueError(f"{text!r} is not a valid host name")
    return name


def address_kind(address: IPAddress) -> str | None:
    """Why an address is refused unless listed, or None for a public unicast address.

    IPv6 forms that embed an IPv4 address (mapped, 6to4, NAT64) are judged by that address.
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and any(address in net for net in _NAT64):
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return address_kind(embedded)
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    if address.is_loopback or address.is_unspecified:  # 0.0.0.0 and :: reach this machine
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address in _UNIQUE_LOCAL:
        return "unique-local"
    if address.is_private:
        return "private"
    if address in _SHARED or address.is_multicast or not address.is_global:
        return "not public"
    return None


def _name_kind(name: str) -> str | None:
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback"
    if name in METADATA_NAMES:
        return "cloud metadata"
    return None


@dataclass(frozen=True)
class Policy:
    """The allowlist, parsed: exact names, `*.` suffixes, and listed addresses."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # ".x.y" for each "*.x.y"
    addresses: frozenset[IPAddress] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str], presets: Iterable[str] = ()) -> Policy:
        """Entries may hold several comma-separated patterns; empty ones are ignored.

        Raises:
            EgressError: an unknown preset, or an entry that is no bare name, `*.name` or
                address (a scheme, port, path, range, or a lone `*`).
        """
        names: set[str] = set()
        suffixes: list[str] = []
        addresses: set[IPAddress] = set()
        for preset in _split(presets):
            if preset not in PRESETS:
                known = ", ".join(sorted(PRESETS))
                raise EgressError(text("egress.unknown_preset", preset=repr(preset), known=known))
            names.update(PRESETS[preset])
        for entry in _split(entries):
            host = _parse_entry(entry)
            if isinstance(host, str) and host.startswith("*."):
                if host[1:] not in suffixes:
                    suffixes.append(host[1:])
            elif isinstance(host, str):
                names.add(host)
            else:
                addresses.add(_unmapped(host))
        return cls(frozenset(names), tuple(suffixes), frozenset(addresses))

    @property
    def entries(self) -> tuple[str, ...]:
        """The policy as sorted --allow values (for logs, docs and provenance)."""
        wild = [f"*{suffix}" for suffix in self.suffixes]
        return tuple(sorted([*self.names, *wild, *map(str, self.addresses)]))

    def check_target(self, host: Host) -> Decision:
        """The decision on the name or address alone: made before any lookup, so a denied
        name is never resolved."""
        if not isinstance(host, str):
            address = _unmapped(host)
            if address in self.addresses:
                return Decision(True, text("egress.listed", entry=address))
            kind = word("egress.kind", address_kind(address) or "public")
            return self._deny(str(address), what=text("egress.an_address", kind=kind))
        if host in self.names:
            return Decision(True, text("egress.listed", entry=host))
        if special := _name_kind(host):
            what = text("egress.a_name", kind=word("egress.kind", special))
            return self._deny(host, what=what, note=text("egress.wildcard_note"))
        if host.rpartition(".")[2].isdigit():
            return Decision(False, text("egress.numeric_name"))
        for suffix in self.suffixes:
            if host.endswith(suffix):
                return Decision(True, text("egress.listed", entry=f"*{suffix}"))
        return self._deny(host)

    def check_addresses(self, addresses: Sequence[IPAddress]) -> Decision:
        """The decision on what an allowed name resolved to: every address must be public
        or listed itself."""
        if not addresses:
            return Decision(False, text("egress.no_address"))
        for address in map(_unmapped, addresses):
            refused = address_kind(address)
            if refused is not None and address not in self.addresses:
                kind = word("egress.kind", refused)
                return Decision(False, text("egress.resolves_to", address=address, kind=kind))
        return Decision(True, text("egress.resolved"))

    def _deny(self, entry: str, *, what: str = "", note: str = "") -> Decision:
        empty = not (self.names or self.suffixes or self.addresses)
        where = text("egress.empty_list" if empty else "egress.the_list")
        return Decision(
            False, text("egress.not_listed", what=what, where=where, note=note, entry=entry)
        )


def _split(values: Iterable[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _parse_entry(entry: str) -> Host:
    if entry == "*":
        raise EgressError(text("egress.allow_all"))
    if "/" in entry or (":" in entry and not _is_address(entry)):
        raise EgressError(text("egress.bad_entry", entry=repr(entry)))
    wildcard = entry.startswith("*.")
    try:
        host = parse_host(entry[2:] if wildcard else entry)
    except ValueError as exc:
        raise EgressError(text("egress.entry_problem", entry=repr(entry), problem=exc)) from exc
    if wildcard and not isinstance(host, str):
        raise EgressError(text("egress.wildcard_address", entry=repr(entry)))
    return f"*.{host}" if wildcard else host


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def _unmapped(address: IPAddress) -> IPAddress:
    """::ffff:a.b.c.d is a.b.c.d: listed and judged as one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
