"""Where the controller is and how this agent proves who it is: `--controller`, `--id` and the
security group (docs/security.md), and their reading into credentials and the agent's id."""

from __future__ import annotations

import argparse
import os
import socket

from loadfleet.wire import DEFAULT_CONTROLLER, dial
from loadfleet.wire.dial import ClientCredentials

from ..credentials import agent_id
from ..errors import UsageError

CONTROLLER_ENV = dial.CONTROLLER_ENV


def add_address_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--controller",
        default=os.environ.get(CONTROLLER_ENV, DEFAULT_CONTROLLER),
        metavar="HOST:PORT",
        help=f"controller address (default ${CONTROLLER_ENV} or {DEFAULT_CONTROLLER})",
    )
    parser.add_argument(
        "--id",
        dest="agent_id",
        help="agent id shown in results (default: the name in --tls-cert or the token file, else HOSTNAME-PID)",
    )


def add_security_options(parser: argparse.ArgumentParser) -> None:
    security = parser.add_argument_group(
        "security",
        "how to reach a controller that serves TLS (docs/security.md); each flag defaults to its environment variable",
    )
    security.add_argument(
        "--tls-ca", metavar="FILE", help=f"CA that signed the controller's certificate (${dial.TLS_CA_ENV})"
    )
    security.add_argument(
        "--tls-cert",
        metavar="FILE",
        help=f"this agent's certificate; its name is the agent's id (${dial.TLS_CERT_ENV})",
    )
    security.add_argument("--tls-key", metavar="FILE", help=f"its private key (${dial.TLS_KEY_ENV})")
    security.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"instead of a certificate: a file with this agent's `agent NAME TOKEN` line (${dial.TOKEN_FILE_ENV})",
    )


def credentials(args: argparse.Namespace) -> ClientCredentials:
    try:
        return dial.client_credentials(
            tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key, token_file=args.token_file
        )
    except dial.CredentialsError as exc:
        raise UsageError(str(exc)) from None


def resolve_agent_id(args: argparse.Namespace, creds: ClientCredentials) -> str:
    """The id the credentials grant, else `--id`, else HOSTNAME-PID (UsageError when they disagree)."""
    return agent_id(creds, args.agent_id, f"{socket.gethostname()}-{os.getpid()}")
