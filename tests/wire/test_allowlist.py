"""The allow-list's meaning, shared by agents (which enforce it) and the controller."""

import ipaddress

import pytest

from loadfleet.wire.allowlist import (
    LOOPBACK_ONLY,
    AllowList,
    AllowListError,
    Verdict,
    ipv4_form_problem,
    socket_address,
)


def ip(text):
    return ipaddress.ip_address(text)


@pytest.mark.parametrize(
    "text, shown",
    [
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("10.1.2.3", "10.1.2.3"),
        ("10.1.2.3/24", "10.1.2.0/24"),
        ("10.0.0.0/8:8080", "10.0.0.0/8:8080"),
        ("::1", "::1"),
        ("fd00::/8", "fd00::/8"),
        ("[fd00::/8]:443", "[fd00::/8]:443"),
        ("[::1]:8080", "[::1]:8080"),
        ("Web1.Example.", "web1.example"),
        ("web1.example:80", "web1.example:80"),
        ("localhost", "localhost"),
    ],
)
def test_entries_read_and_print_back(text, shown):
    assert str(AllowList.parse(text)) == shown


@pytest.mark.parametrize(
    "text",
    [
        "",
        " , ",
        "10.0.0.0/33",
        "10.0.0.0/8:0",
        "10.0.0.0/8:65536",
        "[::1",
        "[::1]x",
        "a b",
        "http://x",
        "-bad.example",
        "x" * 300,
        ",".join(["10.0.0.1"] * 257),
    ],
)
def test_bad_entries_are_refused(text):
    with pytest.raises(AllowListError):
        AllowList.parse(text)


def test_addresses_networks_and_ports():
    allow = AllowList.parse("10.0.0.0/8:8080,192.168.1.7,fd00::/8")
    assert allow.allows(ip("10.9.9.9"), 8080) and not allow.allows(ip("10.9.9.9"), 80)
    assert allow.allows(ip("192.168.1.7"), 1) and not allow.allows(ip("192.168.1.8"), 1)
    assert allow.allows(ip("fd12::1"), 443) and not allow.allows(ip("fe80::1"), 443)
    # a mapped IPv6 address is the IPv4 address it carries
    assert allow.allows(ip("::ffff:192.168.1.7"), 1) and not LOOPBACK_ONLY.allows(ip("::ffff:10.0.0.1"), 80)
    assert LOOPBACK_ONLY.allows(ip("::ffff:127.0.0.1"), 80)


def test_loopback_only_is_the_default_list():
    assert LOOPBACK_ONLY.allows(ip("127.0.0.2"), 80) and LOOPBACK_ONLY.allows(ip("::1"), 80)
    assert not LOOPBACK_ONLY.allows(ip("10.0.0.1"), 80) and not LOOPBACK_ONLY.allows(ip("0.0.0.0"), 80)


def test_host_entries_allow_the_addresses_they_resolved_to():
    allow = AllowList.parse("web1.example:80")
    [entry] = allow.host_entries
    named = {entry: {ip("10.0.0.7")}}
    assert allow.allows(ip("10.0.0.7"), 80, named) and not allow.allows(ip("10.0.0.7"), 81, named)
    assert not allow.allows(ip("10.0.0.8"), 80, named)


@pytest.mark.parametrize(
    "url, verdict",
    [
        ("http://127.0.0.2:8080", Verdict.ALLOWED),
        ("http://10.0.0.1", Verdict.REFUSED),
        ("https://[::1]:8443", Verdict.ALLOWED),
        ("http://web1.example", Verdict.ALLOWED),
        ("http://web1.example:8080", Verdict.UNKNOWN),
        ("http://other.example", Verdict.UNKNOWN),
        ("http://127.0.0.010:80", Verdict.REFUSED),
        ("http://127.1:80", Verdict.REFUSED),
    ],
)
def test_what_the_controller_can_tell_without_resolving(url, verdict):
    allow = AllowList.parse("127.0.0.0/8,::1,web1.example:80")
    assert allow.verdict(url) is verdict


def test_socket_addresses_bracket_ipv6():
    assert socket_address(ip("10.0.0.1"), 80) == "10.0.0.1:80"
    assert socket_address(ip("::1"), 8080) == "[::1]:8080"


# IPv4 addresses in forms that resolvers read differently (glibc's inet_aton: octal and hex parts,
# fewer parts; Java: decimal only), and what glibc makes of them.
NON_CANONICAL_IPV4 = [
    ("127.0.0.010", "127.0.0.8"),  # the audit's B1: Java dials 127.0.0.10
    ("0177.0.0.1", "127.0.0.1"),  # Java dials 177.0.0.1, a public address
    ("127.000.000.001", "127.0.0.1"),
    ("0x7f.0.0.1", "127.0.0.1"),
    ("0X7F.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("0", "0.0.0.0"),
    ("127.0.0.1.", None),
    ("1.2.3.256", None),
    ("999.0.0.1", None),
    ("1.2.3.4.5", None),
    ("web.123", None),  # a last label that is a number: an address to browsers (WHATWG URL)
    ("１２７.０.０.１", "127.0.0.1"),  # noqa: RUF001 - full-width digits: IDNA (Python's getaddrinfo) makes them ASCII
    ("127。0。0。1", "127.0.0.1"),  # an ideographic full stop is a dot to IDNA
]


@pytest.mark.parametrize("host, glibc", NON_CANONICAL_IPV4, ids=[h for h, _ in NON_CANONICAL_IPV4])
def test_a_non_canonical_ipv4_literal_is_a_problem_naming_the_host(host, glibc):
    problem = ipv4_form_problem(host)
    assert problem and repr(host) in problem and "non-canonical" in problem
    assert (f"glibc reads it as {glibc}" in problem) if glibc else "glibc" not in problem


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "10.0.0.8",
        "0.0.0.0",
        "255.255.255.255",
        "localhost",
        "web1.example",
        "web1.example.",
        "123.example",
        "0x7f.example",
        "::1",
        "::ffff:127.0.0.1",
        "fd00::10",
        "",
    ],
)
def test_canonical_addresses_ipv6_and_names_are_no_problem(host):
    assert ipv4_form_problem(host) is None


@pytest.mark.parametrize("entry", ["010.0.0.0/8", "127.1", "0177.0.0.1:80", "2130706433"])
def test_an_entry_in_a_non_canonical_ipv4_form_is_refused_not_read_as_a_host_name(entry):
    with pytest.raises(AllowListError, match="non-canonical"):
        AllowList.parse(entry)
