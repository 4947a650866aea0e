"""How a client (an agent, the CLI) dials the controller: plaintext on loopback, else TLS
that checks the controller against a CA, with a client certificate or a bearer token.

The names of the flags' environment variables are part of the contract (deployment
tooling writes them): LOADFLEET_CONTROLLER, LOADFLEET_TLS_CA, LOADFLEET_TLS_CERT,
LOADFLEET_TLS_KEY, LOADFLEET_TOKEN_FILE.

A token file holds one line: the token alone, or `role name token` as the controller's
token file has it (so an operator can copy their line); `#` starts a comment. Tokens
never come from a command-line argument (other users see those in `ps`). gRPC sends
access tokens only over TLS, and so does this module.

Every channel pings its controller (`KEEPALIVE_OPTIONS`): a controller whose host vanished
without a FIN or RST (powered off, a link cut, the process stopped) is noticed within
KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS of the last thing heard from it, where TCP alone
would wait many minutes (or forever, when the peer's kernel still acknowledges). The
controller's server accepts pings that often (rpc/server.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from .files import FileRefused, read_regular

CONTROLLER_ENV = "LOADFLEET_CONTROLLER"
TLS_CA_ENV = "LOADFLEET_TLS_CA"
TLS_CERT_ENV = "LOADFLEET_TLS_CERT"
TLS_KEY_ENV = "LOADFLEET_TLS_KEY"
TOKEN_FILE_ENV = "LOADFLEET_TOKEN_FILE"
# A file larger than this is not a token file or a PEM file.
MAX_CREDENTIAL_FILE_BYTES = 1 * 2**20

# An HTTP/2 PING when nothing was heard for this long (grpc-core's keepalive,
# doc/keepalive.md) ...
KEEPALIVE_TIME_MS = 2_000
# ... and the transport is closed when its answer has not come this long after it. A silent
# peer is noticed 11 to 13 s after the last thing heard from it (the fleet promises 15 s;
# measured: tests/e2e/test_keepalive.py), and a stall of 10 s (a long GC pause, a VM
# migrated, a link that flaps) is ridden out without reconnecting.
KEEPALIVE_TIMEOUT_MS = 11_000
KEEPALIVE_OPTIONS = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    # What ends a keepalive ping that gets no answer in grpc-core 1.85 is the general ping
    # timeout (default 1 min; chttp2 writing.cc arms no separate keepalive timer): without
    # it a stopped peer went unnoticed for a minute.
    ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    # Ping while no call is in flight too (between a CLI's calls), else nothing notices then.
    ("grpc.keepalive_permit_without_calls", 1),
    # grpc-core stops pinging after 2 pings without a data frame sent (the default): a CLI
    # following a run sends nothing after its request, so it would go blind. 0: no limit.
    ("grpc.http2.max_pings_without_data", 0),
)


class CredentialsError(Exception):
    """A TLS or token file is missing, unreadable or malformed (a usage error for callers)."""


@dataclass(frozen=True)
class TokenLine:
    """One line of a token file: `role name token`, or a token alone (role and name empty)."""

    token: str
    role: str = ""
    name: str = ""


@dataclass(frozen=True)
class ClientCredentials:
    """What a client presents and trusts. Empty: plaintext (loopback controllers only)."""

    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: TokenLine | None = None
    # Where the certificate came from, for messages and for reading its name.
    cert_path: Path | None = None

    @property
    def secure(self) -> bool:
        return any(x is not None for x in (self.ca_pem, self.cert_pem, self.token))

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """TLS (the system's roots unless a CA is given), plus the token on every call."""
        tls = grpc.ssl_channel_credentials(
            root_certificates=self.ca_pem, private_key=self.key_pem, certificate_chain=self.cert_pem
        )
        if self.token is None:
            return tls
        return grpc.composite_channel_credentials(tls, grpc.access_token_call_credentials(self.token.token))

    def describe(self) -> str:
        if not self.secure:
            return "plaintext"
        who = (
            f"certificate {self.cert_path}"
            if self.cert_pem
            else f"token of {self.token.name or 'an unnamed holder'}"
            if self.token
            else "no client credentials"
        )
        return f"TLS, {who}"


def open_channel(
    address: str, credentials: ClientCredentials, options: Sequence[tuple[str, int | str]] = ()
) -> grpc.aio.Channel:
    """A channel to the controller, with keepalive pings (`KEEPALIVE_OPTIONS`; `options` are
    added to them)."""
    options = (*KEEPALIVE_OPTIONS, *options)
    if credentials.secure:
        return grpc.aio.secure_channel(address, credentials.channel_credentials(), options=options)
    return grpc.aio.insecure_channel(address, options=options)


def client_credentials(
    *,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    token_file: str | None = None,
    env: Mapping[str, str] = os.environ,
) -> ClientCredentials:
    """Flags first, then the environment; reads and checks every file named."""
    tls_ca = tls_ca or env.get(TLS_CA_ENV) or None
    tls_cert = tls_cert or env.get(TLS_CERT_ENV) or None
    tls_key = tls_key or env.get(TLS_KEY_ENV) or None
    token_file = token_file or env.get(TOKEN_FILE_ENV) or None
    if bool(tls_cert) != bool(tls_key):
        raise CredentialsError("--tls-cert and --tls-key go together (the certificate and its key)")
    if tls_cert and token_file:
        raise CredentialsError("give a client certificate (--tls-cert/--tls-key) or a token (--token-file), not both")
    return ClientCredentials(
        ca_pem=read_pem(tls_ca, "--tls-ca", "CERTIFICATE") if tls_ca else None,
        cert_pem=read_pem(tls_cert, "--tls-cert", "CERTIFICATE") if tls_cert else None,
        key_pem=read_pem(tls_key, "--tls-key", "PRIVATE KEY") if tls_key else None,
        token=read_token_file(token_file) if token_file else None,
        cert_path=Path(tls_cert) if tls_cert else None,
    )


def read_pem(path: str, flag: str, kind: str) -> bytes:
    """A PEM file holding `kind`; a private key must be kept from other users."""
    data = _read(path, flag, secret=kind == "PRIVATE KEY")
    if f"{kind}-----".encode() not in data:  # PRIVATE KEY also matches EC/RSA PRIVATE KEY
        raise CredentialsError(f"{flag} {path}: not a PEM file with a {kind.lower()}")
    return data


def read_token_file(path: str) -> TokenLine:
    """The token in a client's token file (its first line that is not a comment)."""
    lines = token_lines(path)
    if not lines:
        raise CredentialsError(f"--token-file {path}: no token in it")
    fields = lines[0][1]
    if len(fields) == 1:
        return TokenLine(token=fields[0])
    if len(fields) == 3:
        return TokenLine(role=fields[0], name=fields[1], token=fields[2])
    raise CredentialsError(f"--token-file {path}, line {lines[0][0]}: expected the token, or `role name token`")


def token_lines(path: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every line of a token file that is not blank or a comment."""
    return list(_lines(_read(path, "--token-file", secret=True), path))


def _lines(data: bytes, path: str) -> Iterator[tuple[int, list[str]]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CredentialsError(f"{path}: not UTF-8 text") from None
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if fields:
            yield number, fields


def _read(path: str, flag: str, *, secret: bool = False) -> bytes:
    """A regular file of at most MAX_CREDENTIAL_FILE_BYTES (files.py); a `secret` (a token
    file, a private key) kept from other users."""
    try:
        return read_regular(path, MAX_CREDENTIAL_FILE_BYTES, private=secret)
    except FileRefused as exc:
        raise CredentialsError(f"{flag} {path}: {exc}") from None
