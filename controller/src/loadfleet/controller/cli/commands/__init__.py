"""The commands of `loadfleet` by name, in the order `loadfleet --help` lists them (vegeta's
shape: one module per command, each with its parser and its handler).

Each command's module has
    add_parser(commands, name)   adds its parser, with its flags and help, to the subparsers
    async handle(args) -> int    does it; returns the exit code (failures raise LoadfleetError)
Option groups that several commands share are in ../options.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..options import Subcommands
from . import agents, certs, compare, controller, report, run, runs, schema, status, stop, validate


@dataclass(frozen=True)
class Command:
    add_parser: Callable[[Subcommands, str], None]
    handle: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


COMMANDS: Mapping[str, Command] = MappingProxyType(
    {
        "controller": Command(controller.add_parser, controller.handle),
        "run": Command(run.add_parser, run.handle),
        "validate": Command(validate.add_parser, validate.handle),
        "schema": Command(schema.add_parser, schema.handle),
        "report": Command(report.add_parser, report.handle),
        "compare": Command(compare.add_parser, compare.handle),
        "agents": Command(agents.add_parser, agents.handle),
        "runs": Command(runs.add_parser, runs.handle),
        "status": Command(status.add_parser, status.handle),
        "certs": Command(certs.add_parser, certs.handle),
        "stop": Command(stop.add_parser, stop.handle),
    }
)
