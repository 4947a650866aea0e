"""`loadfleet status`: follow a run that is going, from any shell (progress lines, then its summary)."""

from __future__ import annotations

import argparse

from ..follow import follow
from ..options import (
    Subcommands,
    add_ci_output_options,
    add_client_security,
    add_controller_option,
    ci_outputs,
    connect,
)


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="follow a run that is going (progress lines, then its summary)",
        epilog="example: loadfleet status 20261123-071223-c3c8 --controller ctrl:7700 --junit results.xml",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="as `loadfleet runs` lists it")
    add_controller_option(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON (progress goes to stderr)")
    add_ci_output_options(p)
    add_client_security(p)


async def handle(args: argparse.Namespace) -> int:
    outputs = ci_outputs(args)  # an unwritable file is said before following anything
    async with connect(args) as client:
        return await follow(client, args.run_id, args.json, outputs)
