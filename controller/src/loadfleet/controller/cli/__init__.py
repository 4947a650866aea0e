"""The `loadfleet` command: a thin shell over the controller and its client.

__init__.py     main: the top parser, one subparser per command, errors -> exit codes
commands/       the command map and one module per command (its parser and its handler)
options.py      option groups several commands share: --controller and the client's
                credentials, --target, --influx-*, table or JSON listings
follow.py       following a run to its summary (run, status)
client.py       the client of the controller's RunService
local.py        a controller and N agents on this machine (run --local)
certs.py        a private CA and the fleet's certificates (certs)
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from loadfleet.controller import __version__
from loadfleet.controller.model.errors import EXIT_RUN_FAILED, LoadfleetError

from .commands import COMMANDS

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadfleet",
        description="Distributed HTTP load testing: controller and CLI.",
        epilog="Exit codes: 0 done, 1 run failed, its run directory incomplete (a full disk) or controller "
        "unreachable, 2 bad input, "
        "3 a stop condition of the plan ended the run early and every threshold passed, "
        "4 a threshold failed or no response was ok (compare --gate: a regression), "
        "5 compare --gate could not tell (inconclusive); results are written either way. "
        "Several apply: the first of 2, 1, 4, 3, 0.",
    )
    parser.add_argument("--version", action="version", version=f"loadfleet {__version__}")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_parser(commands, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(COMMANDS[args.command].handle(args))
    except KeyboardInterrupt:
        print("loadfleet: interrupted", file=sys.stderr)
        return EXIT_RUN_FAILED
    except LoadfleetError as exc:
        print(f"loadfleet: {exc}", file=sys.stderr)
        return exc.exit_code
