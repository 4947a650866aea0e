"""Who may talk to the controller, and how it serves: the listening side of docs/security.md.

Three ways to serve (`AuthMode`):

- LOCAL: plaintext, no authentication; every caller may do everything. Only on a loopback
  address (`loadfleet run --local`, tests, one machine), or when told `--insecure`.
- CERTIFICATES: TLS, and every client shows a certificate signed by `--tls-ca`; its role
  is its `loadfleet:role:` URI, its name its common name (certs.py makes such certificates).
- TOKENS: TLS, and every call carries a bearer token listed in `--token-file`, one
  `role name token` per line (for sites without a PKI). Compared in constant time.

A `Principal` is the authenticated caller; `rpc/auth.py` checks what it may do.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import socket
from dataclasses import dataclass

import grpc

from loadfleet.controller.model.errors import UsageError
from loadfleet.wire.dial import CredentialsError, read_pem, token_lines

ROLE_URI_PREFIX = "loadfleet:role:"
# A token shorter than this can be guessed; `openssl rand -hex 32` makes a good one.
MIN_TOKEN_CHARS = 32


class Role(enum.Enum):
    """What a certificate or token lets its holder do (docs/security.md)."""

    CONTROLLER = "controller"
    AGENT = "agent"
    OPERATOR = "operator"

    @property
    def uri(self) -> str:
        return ROLE_URI_PREFIX + self.value


class AuthMode(enum.Enum):
    LOCAL = "local"
    CERTIFICATES = "certificates"
    TOKENS = "tokens"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `role` None: a LOCAL controller's caller, who may do anything."""

    role: Role | None
    name: str = ""

    def describe(self) -> str:
        return "a local caller" if self.role is None else f"{self.role.value} {self.name!r}"


LOCAL_CALLER = Principal(role=None)


@dataclass(frozen=True)
class _Token:
    digest: bytes
    principal: Principal


class TokenTable:
    """The controller's tokens. Looked up by comparing SHA-256 digests with
    `hmac.compare_digest`, against every entry (the time taken says nothing about which
    entry, or how much of a token, matched)."""

    def __init__(self, entries: list[tuple[Principal, str]]):
        self._tokens = tuple(_Token(_digest(token), principal) for principal, token in entries)

    def __len__(self) -> int:
        return len(self._tokens)

    def lookup(self, token: str) -> Principal | None:
        digest = _digest(token)
        found = None
        for entry in self._tokens:
            if hmac.compare_digest(entry.digest, digest):
                found = entry.principal
        return found

    @classmethod
    def read(cls, path: str) -> TokenTable:
        """`role name token` lines (`#` comments). Every problem is refused at startup."""
        try:
            lines = token_lines(path)
        except CredentialsError as exc:
            raise UsageError(str(exc)) from None
        entries, seen_tokens, seen_names = [], set(), set()
        for number, fields in lines:
            where = f"--token-file {path}, line {number}"
            if len(fields) != 3:
                raise UsageError(f"{where}: expected `role name token` (roles: agent, operator)")
            role_text, name, token = fields
            try:
                role = Role(role_text)
            except ValueError:
                role = None
            if role not in (Role.AGENT, Role.OPERATOR):
                raise UsageError(f"{where}: the role is agent or operator, not {role_text!r}")
            if len(token) < MIN_TOKEN_CHARS:
                raise UsageError(
                    f"{where}: a token needs at least {MIN_TOKEN_CHARS} characters "
                    "(make one with `openssl rand -hex 32`)"
                )
            if token in seen_tokens or (role, name) in seen_names:
                raise UsageError(f"{where}: {name!r} or its token is listed twice")
            seen_tokens.add(token)
            seen_names.add((role, name))
            entries.append((Principal(role, name), token))
        if not entries:
            raise UsageError(f"--token-file {path}: no tokens in it")
        return cls(entries)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class ServerSecurity:
    """How the controller serves: its TLS material and how callers are authenticated."""

    mode: AuthMode = AuthMode.LOCAL
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    client_ca_pem: bytes | None = None
    tokens: TokenTable | None = None
    # --insecure: serve without TLS and authentication on any address.
    insecure: bool = False

    @property
    def tls(self) -> bool:
        return self.cert_pem is not None

    def server_credentials(self) -> grpc.ServerCredentials | None:
        if not self.tls:
            return None
        return grpc.ssl_server_credentials(
            [(self.key_pem, self.cert_pem)],
            root_certificates=self.client_ca_pem,
            require_client_auth=self.mode is AuthMode.CERTIFICATES,
        )

    def describe(self) -> str:
        return {
            AuthMode.LOCAL: "TLS, no authentication" if self.tls else "plaintext, no authentication",
            AuthMode.CERTIFICATES: "TLS, client certificates required",
            AuthMode.TOKENS: f"TLS, {len(self.tokens or ())} token(s)",
        }[self.mode]


def server_security(
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_ca: str | None = None,
    token_file: str | None = None,
    insecure: bool = False,
) -> ServerSecurity:
    """The controller's flags, checked: every inconsistency is a UsageError (exit 2)."""
    if bool(tls_cert) != bool(tls_key):
        raise UsageError("--tls-cert and --tls-key go together (the controller's certificate and its key)")
    if (tls_ca or token_file) and not tls_cert:
        raise UsageError(
            "--tls-ca and --token-file need TLS: give --tls-cert and --tls-key too "
            "(`loadfleet certs controller` makes them)"
        )
    if tls_ca and token_file:
        raise UsageError("give --tls-ca (clients show certificates) or --token-file (clients send tokens), not both")
    try:
        cert = read_pem(tls_cert, "--tls-cert", "CERTIFICATE") if tls_cert else None
        key = read_pem(tls_key, "--tls-key", "PRIVATE KEY") if tls_key else None
        ca = read_pem(tls_ca, "--tls-ca", "CERTIFICATE") if tls_ca else None
    except CredentialsError as exc:
        raise UsageError(str(exc)) from None
    tokens = TokenTable.read(token_file) if token_file else None
    mode = AuthMode.CERTIFICATES if ca else AuthMode.TOKENS if tokens else AuthMode.LOCAL
    return ServerSecurity(mode=mode, cert_pem=cert, key_pem=key, client_ca_pem=ca, tokens=tokens, insecure=insecure)


def check_listen(listen: str, security: ServerSecurity) -> None:
    """Refuses to serve beyond loopback without TLS and authentication (unless --insecure):
    whoever reaches an open controller can aim every agent at any address."""
    if security.insecure or (security.tls and security.mode is not AuthMode.LOCAL):
        return
    host = listen.rsplit(":", 1)[0].strip("[]")
    if not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {listen} without TLS and authentication (anyone who reaches it "
            "could aim the agents anywhere): give --tls-cert, --tls-key and --tls-ca or --token-file, "
            "listen on 127.0.0.1, or accept the risk with --insecure"
        )


def is_loopback(host: str) -> bool:
    """True when every address `host` stands for is a loopback address ("" and 0.0.0.0 are every address)."""
    if host in ("", "*"):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    # typeshed allows an int for the address (an IPv6 socket of a Python without IPv6): not here
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)  # type: ignore[union-attr]
