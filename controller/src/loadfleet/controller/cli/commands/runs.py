"""`loadfleet runs`: list the controller's runs, as a table or JSON."""

from __future__ import annotations

import argparse

from loadfleet.controller.model.errors import EXIT_OK
from loadfleet.controller.output import listings

from ..options import Subcommands, add_client_security, add_controller_option, connect, print_listing


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(name, help="list the controller's runs")
    add_controller_option(p)
    p.add_argument("--json", action="store_true")
    add_client_security(p)


async def handle(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        runs = await client.list_runs()
        print_listing(runs, listings.runs_table, args.json)
    return EXIT_OK
