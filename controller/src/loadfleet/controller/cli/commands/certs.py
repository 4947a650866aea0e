"""`loadfleet certs KIND`: a private CA and the certificates of a fleet (docs/security.md).
KIND is init (the CA), controller, agent or operator."""

from __future__ import annotations

import argparse
from pathlib import Path

from loadfleet.controller.model.errors import EXIT_OK, UsageError
from loadfleet.controller.service.security import Role

from .. import certs
from ..options import Subcommands


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="make a CA and the certificates of a fleet (docs/security.md)",
        description="A private CA and certificates for the controller, agents and operators. "
        "The role is carried in the certificate; an agent's id is its certificate's name.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n"
        "  loadfleet certs init --dir pki\n"
        "  loadfleet certs controller --dir pki --name ctrl.example --ip 10.0.0.5\n"
        "  loadfleet certs agent --dir pki load-1 load-2 load-3\n"
        "  loadfleet certs operator --dir pki alice",
    )
    kinds = p.add_subparsers(dest="certs_command", required=True, metavar="KIND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, required=True, help="where the CA and certificates are")
    common.add_argument("--force", action="store_true", help="replace files that exist")
    k = kinds.add_parser("init", parents=[common], help="a new CA (ca.crt, ca.key)")
    k.add_argument(
        "--days", type=int, default=certs.DEFAULT_CA_DAYS, help=f"validity (default {certs.DEFAULT_CA_DAYS})"
    )
    _add_controller_kind(kinds, common)
    for kind, what in (
        ("agent", "agents (agent-NAME.crt/.key); the name is the agent's id"),
        ("operator", "operators who start, stop, watch and list runs (operator-NAME.crt/.key)"),
    ):
        k = kinds.add_parser(kind, parents=[common], help=f"certificates for {what}")
        k.add_argument("names", nargs="+" if kind == "agent" else 1, metavar="NAME")
        _add_cert_days(k)


def _add_controller_kind(kinds: Subcommands, common: argparse.ArgumentParser) -> None:
    k = kinds.add_parser("controller", parents=[common], help="the controller's certificate (controller.crt/.key)")
    k.add_argument(
        "--name",
        dest="dns_names",
        action="append",
        default=[],
        metavar="HOSTNAME",
        help="a DNS name agents and the CLI dial the controller by (repeatable)",
    )
    k.add_argument(
        "--ip", dest="ips", action="append", default=[], metavar="IP", help="an IP address they dial it by (repeatable)"
    )
    _add_cert_days(k)


def _add_cert_days(k: argparse.ArgumentParser) -> None:
    k.add_argument(
        "--days",
        type=int,
        default=certs.DEFAULT_CERT_DAYS,
        help=f"validity (default {certs.DEFAULT_CERT_DAYS}; never beyond the CA's)",
    )


async def handle(args: argparse.Namespace) -> int:
    return make_certs(args)


def make_certs(args: argparse.Namespace) -> int:
    if args.days < 1:
        raise UsageError("--days must be at least 1")
    issued = _issue(args)
    for i in issued:
        print(f"wrote {i.cert} and {i.key} (key mode 0600), valid until {i.not_after:%Y-%m-%d}")
    if args.certs_command == "init":
        print(
            f"next: `loadfleet certs controller --dir {args.dir} --name HOST`; keep {issued[0].key} offline "
            "once the fleet's certificates are made"
        )
    return EXIT_OK


def _issue(args: argparse.Namespace) -> list[certs.Issued]:
    """The CA, the controller's certificate, or those of the agents or operators named."""
    if args.certs_command == "init":
        return [certs.init_ca(args.dir, days=args.days, force=args.force)]
    if args.certs_command == "controller":
        name = (args.dns_names or args.ips or ["controller"])[0]
        return [
            certs.issue(
                args.dir,
                Role.CONTROLLER,
                name,
                dns_names=tuple(args.dns_names),
                ips=tuple(args.ips),
                days=args.days,
                force=args.force,
            )
        ]
    role = Role(args.certs_command)
    for name in args.names:  # every name is checked before anything is written
        certs.check_name(name, f"{role.value} name")
    return [certs.issue(args.dir, role, name, days=args.days, force=args.force) for name in args.names]
