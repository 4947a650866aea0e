"""Mutual TLS for the fleet bench (`bench.py --tls`): the fleet's certificates made with
`loadfleet certs`' module, one per simulated agent (an agent certificate opens only the
session of its own name, docs/security.md), the controller's flags, and the channel
credentials of each simulated agent and of the bench's operator. The same fleet with and
without --tls gives what TLS costs the controller.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from loadfleet.controller.cli import certs
from loadfleet.controller.service.security import Role

OPERATOR = "fleet-bench"


def make_pki(directory: Path, agent_ids: list[str]) -> None:
    certs.init_ca(directory)
    certs.issue(directory, Role.CONTROLLER, "localhost", dns_names=("localhost",), ips=("127.0.0.1",))
    certs.issue(directory, Role.OPERATOR, OPERATOR)
    for agent_id in agent_ids:
        certs.issue(directory, Role.AGENT, agent_id)


def controller_args(directory: Path) -> list[str]:
    return [
        "--tls-cert",
        str(directory / "controller.crt"),
        "--tls-key",
        str(directory / "controller.key"),
        "--tls-ca",
        str(directory / "ca.crt"),
    ]


def credentials(directory: Path, role: str, name: str) -> grpc.ChannelCredentials:
    cert = directory / f"{role}-{name}.crt"
    return grpc.ssl_channel_credentials(
        (directory / "ca.crt").read_bytes(), cert.with_suffix(".key").read_bytes(), cert.read_bytes()
    )


def channel(address: str, directory: Path | None, role: str, name: str, options=()) -> grpc.aio.Channel:
    """Plaintext without a PKI directory, else TLS with `name`'s certificate."""
    if directory is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, credentials(directory, role, name), options=options)
