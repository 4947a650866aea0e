"""Certificates and tokens for tests of the secured controller: a CA with a controller
certificate for 127.0.0.1/localhost, agents and an operator, and a second, foreign CA with
certificates of the same names (made with `loadfleet certs`' module, as a user would)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from loadfleet.controller.cli import certs
from loadfleet.controller.service.security import Role

AGENTS = ("a1", "a2")
OPERATOR = "alice"


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def cert(self, role: str, name: str = "") -> Path:
        return self.dir / ("controller.crt" if role == "controller" else f"{role}-{name}.crt")

    def key(self, role: str, name: str = "") -> Path:
        return self.cert(role, name).with_suffix(".key")

    def server_args(self) -> tuple[str, ...]:
        return (
            "--tls-cert",
            str(self.cert("controller")),
            "--tls-key",
            str(self.key("controller")),
            "--tls-ca",
            str(self.ca),
        )

    def client_args(self, role: str, name: str) -> tuple[str, ...]:
        return (
            "--tls-ca",
            str(self.ca),
            "--tls-cert",
            str(self.cert(role, name)),
            "--tls-key",
            str(self.key(role, name)),
        )


def make_pki(
    directory: Path, *, controller_ips: tuple[str, ...] = ("127.0.0.1",), agents: tuple[str, ...] = AGENTS
) -> Pki:
    certs.init_ca(directory)
    certs.issue(directory, Role.CONTROLLER, "localhost", dns_names=("localhost",), ips=controller_ips)
    for name in agents:
        certs.issue(directory, Role.AGENT, name)
    certs.issue(directory, Role.OPERATOR, OPERATOR)
    return Pki(directory)


@dataclass(frozen=True)
class Tokens:
    """A controller's token file and one client token file per holder."""

    server_file: Path
    client_files: dict[str, Path]


def make_tokens(directory: Path) -> Tokens:
    directory.mkdir(parents=True, exist_ok=True)
    holders = {("agent", name): secrets.token_hex(32) for name in AGENTS}
    holders[("operator", OPERATOR)] = secrets.token_hex(32)
    server = directory / "tokens"
    server.write_text("# role name token\n" + "".join(f"{r} {n} {t}\n" for (r, n), t in holders.items()))
    server.chmod(0o600)
    clients = {}
    for (role, name), token in holders.items():
        path = directory / f"{role}-{name}.token"
        path.write_text(f"{role} {name} {token}\n")  # the holder's line, as copied from the server's file
        path.chmod(0o600)
        clients[name] = path
    wrong = directory / "wrong.token"
    wrong.write_text(secrets.token_hex(32) + "\n")
    wrong.chmod(0o600)
    clients["wrong"] = wrong
    return Tokens(server, clients)
