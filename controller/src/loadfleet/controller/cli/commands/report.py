"""`loadfleet report`: write a run directory's report.html again (every run writes it at its end)."""

from __future__ import annotations

import argparse
from pathlib import Path

from loadfleet.controller.model.errors import EXIT_OK
from loadfleet.controller.output import report

from ..options import Subcommands


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="write a run's report.html (tables, plots over time, events)",
        description="Build one self-contained HTML file from a run directory "
        "(summary.json, intervals.csv). Every run writes it at its end; "
        "this writes it again, e.g. after an upgrade.",
        epilog="example: loadfleet report runs/20261123-071223-c3c8",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory, e.g. runs/<run-id>")
    p.add_argument("--out", type=Path, metavar="FILE", help="where to write (default RUN_DIR/report.html)")


async def handle(args: argparse.Namespace) -> int:
    print(f"wrote {report.write_report(args.run_dir, args.out)}")
    return EXIT_OK
