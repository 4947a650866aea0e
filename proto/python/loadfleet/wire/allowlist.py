"""Where an agent may send load: its target allow-list (docs/security.md).

The agent's operator writes the list (`--allow-targets`); agents advertise it in
`Hello.allow_targets` and check every assignment against it (the agent is the authority);
the controller reads the advertised lists to refuse at StartRun a plan that no agent could
run. Both sides read the list with this module, so they agree on what it means.

Entries, comma-separated, each optionally with a port:

    10.0.0.0/8   10.1.2.3   fd00::/8   ::1           networks and addresses
    10.0.0.0/8:8080   [fd00::/8]:443   [::1]:8080    ... on one port
    web1.example   web1.example:80                   a host name: the addresses it resolves to

Without a list, an agent allows loopback only (`LOOPBACK_ONLY`). An IPv4-mapped IPv6
address (::ffff:10.0.0.1) is checked as the IPv4 address it is.

An IPv4 address is taken only in its canonical form, four decimal numbers without leading
zeros (`ipv4_form_problem`): resolvers disagree on the others (glibc reads `0177.0.0.1` as
127.0.0.1, Java as 177.0.0.1), so the address checked could differ from the one dialled.
Targets (the controller's plan checks and the agent's guard) and entries are refused in
such a form.
"""

from __future__ import annotations

import enum
import ipaddress
import re
import socket
import unicodedata
from dataclasses import dataclass
from urllib.parse import urlsplit

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_TARGETS_ENV = "LOADFLEET_ALLOW_TARGETS"
# An advertised list longer than this is not an operator's list (the controller ignores it).
MAX_ENTRIES = 256
MAX_ENTRY_CHARS = 260
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?$"
)
DEFAULT_PORTS = {"http": 80, "https": 443}
# A last label in one of the number forms of inet_aton (decimal, octal 0..., hex 0x...) makes a
# host an IPv4 address to resolvers and browsers (WHATWG URL's "ends in a number"), not a name.
_NUMBER_LABEL = re.compile(r"^(?:[0-9]+|0[xX][0-9A-Fa-f]*)$")
# IDNA reads these as dots too (Python's getaddrinfo encodes a host with it, full-width digits and
# dots: "１２７．０．０．１" is 127.0.0.1).  # noqa: RUF003 - the full-width form is the point
_IDNA_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


class AllowListError(ValueError):
    """An entry that is neither an address, a network nor a host name (with an optional port)."""


class Verdict(enum.Enum):
    ALLOWED = "allowed"
    REFUSED = "refused"
    # A host name that no entry names: only resolving it tells (the agent does; the controller does not).
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Entry:
    network: IpNetwork | None = None
    host: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        if self.network is not None:
            text = str(self.network) if self.network.num_addresses > 1 else str(self.network.network_address)
            bracketed = f"[{text}]" if self.network.version == 6 else text
            return f"{bracketed}:{self.port}" if self.port is not None else text
        return f"{self.host}:{self.port}" if self.port is not None else str(self.host)

    def covers(self, address: IpAddress, port: int) -> bool:
        """For network entries: the address (and the port, if the entry has one)."""
        return self.network is not None and _plain(address) in self.network and (self.port is None or self.port == port)


@dataclass(frozen=True)
class AllowList:
    entries: tuple[Entry, ...]

    def __str__(self) -> str:
        return ",".join(str(e) for e in self.entries)

    def texts(self) -> list[str]:
        return [str(e) for e in self.entries]

    @property
    def host_entries(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.host is not None)

    def allows(self, address: IpAddress, port: int, named: dict[Entry, set[IpAddress]] | None = None) -> bool:
        """Whether load may go to address:port. `named`: the addresses each host entry resolved to."""
        if any(e.covers(address, port) for e in self.entries):
            return True
        return any(
            _plain(address) in addresses and (e.port is None or e.port == port)
            for e, addresses in (named or {}).items()
        )

    def verdict(self, url: str) -> Verdict:
        """What can be said of a target URL without resolving anything (the controller's view)."""
        host, port = url_host_port(url)
        if ipv4_form_problem(host):
            return Verdict.REFUSED  # the agent refuses it
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            name = host.lower().rstrip(".")
            if any(e.host == name and (e.port is None or e.port == port) for e in self.entries):
                return Verdict.ALLOWED
            return Verdict.UNKNOWN
        return Verdict.ALLOWED if self.allows(address, port) else Verdict.REFUSED

    @classmethod
    def parse(cls, text: str | list[str]) -> AllowList:
        items = text if isinstance(text, list) else text.split(",")
        entries = tuple(parse_entry(item.strip()) for item in items if item.strip())
        if not entries:
            raise AllowListError("the allow-list is empty (to allow every address, say so: 0.0.0.0/0,::/0)")
        if len(entries) > MAX_ENTRIES:
            raise AllowListError(f"more than {MAX_ENTRIES} entries")
        return cls(entries)


LOOPBACK_ONLY = AllowList(
    (Entry(network=ipaddress.ip_network("127.0.0.0/8")), Entry(network=ipaddress.ip_network("::1/128")))
)


def parse_entry(text: str) -> Entry:
    if len(text) > MAX_ENTRY_CHARS:
        raise AllowListError(f"{text[:40]}...: longer than {MAX_ENTRY_CHARS} characters")
    body, port = text, None
    if text.startswith("["):  # [v6 or v6/len]:port
        close = text.find("]")
        if close < 0:
            raise AllowListError(f"{text!r}: missing ']'")
        body, rest = text[1:close], text[close + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise AllowListError(f"{text!r}: expected ':PORT' after ']'")
            port = _port(rest[1:], text)
    elif text.count(":") == 1:  # v4, v4/len or a host name, with a port
        body, port_text = text.split(":")
        port = _port(port_text, text)
    try:
        return Entry(network=ipaddress.ip_network(body, strict=False), port=port)
    except ValueError:
        pass
    problem = ipv4_form_problem(body.split("/")[0])
    if problem:
        raise AllowListError(f"{text!r}: {problem}")
    if "/" in body or ":" in body or not _HOST_NAME.match(body):
        raise AllowListError(f"{text!r} is not an address, a network (CIDR) or a host name, with an optional :PORT")
    return Entry(host=body.lower().rstrip("."), port=port)


def ipv4_form_problem(host: str) -> str | None:
    """Why `host` may not name a target: it reads as an IPv4 address, but not in canonical
    form (a.b.c.d, decimal, no leading zeros). None for a canonical address, an IPv6 address
    and a host name.

    Refused forms: leading zeros (octal to glibc, decimal to Java), hex parts (0x7f.0.0.1),
    fewer than four parts (127.1), one number (2130706433), a trailing dot, out-of-range parts,
    and any of these in full-width digits or dots (IDNA maps them to ASCII)."""
    ascii_form = unicodedata.normalize("NFKC", host).translate(_IDNA_DOTS)
    labels = ascii_form.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()
    if ":" in ascii_form or not _NUMBER_LABEL.match(labels[-1]):
        return None
    try:
        if str(ipaddress.IPv4Address(host)) == host:
            return None
    except ValueError:
        pass
    return (
        f"{host!r} is an IPv4 address in a non-canonical form{_glibc_reading(ascii_form)}: resolvers "
        "disagree on such forms (leading zeros are octal to some, decimal to others), so load could go "
        "elsewhere than the address checked; write it as four decimal numbers without leading zeros"
    )


def _glibc_reading(host: str) -> str:
    """How glibc's inet_aton (getaddrinfo's) reads a numeric host, as a hint."""
    try:
        return f" (glibc reads it as {socket.inet_ntoa(socket.inet_aton(host))})"
    except (OSError, ValueError):
        return ""


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise AllowListError(f"{entry!r}: the port must be 1-65535")
    return int(text)


def _plain(address: IpAddress) -> IpAddress:
    """::ffff:a.b.c.d is a.b.c.d: a mapped address must not slip past an IPv4 entry."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def url_host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 80)
    return parts.hostname or "", port


def socket_address(address: IpAddress, port: int) -> str:
    """ "ip:port", an IPv6 address in brackets (as JobSpec Target.addresses holds them)."""
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
