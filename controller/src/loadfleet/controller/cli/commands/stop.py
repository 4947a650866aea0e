"""`loadfleet stop`: ask the controller to stop a run; its results are still written."""

from __future__ import annotations

import argparse

from loadfleet.controller.model.errors import EXIT_OK

from ..options import Subcommands, add_client_security, add_controller_option, connect


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="stop a run; its results are still written",
        epilog="example: loadfleet stop 20261123-071223-c3c8 --controller ctrl:7700",
    )
    p.add_argument("run_id", metavar="RUN_ID")
    add_controller_option(p)
    add_client_security(p)


async def handle(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        await client.stop_run(args.run_id)
        print(f"run {args.run_id}: stop requested (agents finish their in-flight requests; results are written)")
    return EXIT_OK
