"""`loadfleet schema`: print the plan's JSON Schema."""

from __future__ import annotations

import argparse
import json

from loadfleet.controller.model.errors import EXIT_OK
from loadfleet.controller.plan.parse import plan_schema

from ..options import Subcommands


def add_parser(commands: Subcommands, name: str) -> None:
    commands.add_parser(name, help="print the plan's JSON Schema")


async def handle(args: argparse.Namespace) -> int:
    print(json.dumps(plan_schema(), indent=2))
    return EXIT_OK
