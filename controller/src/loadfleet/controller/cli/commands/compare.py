"""`loadfleet compare`: runs side by side, as a table (or JSON) and an HTML file of their curves."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadfleet.controller.model.errors import EXIT_OK, UsageError
from loadfleet.controller.output import report

from ..options import Subcommands


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
        help="compare runs side by side (table, and HTML with overlaid curves)",
        description="Print the runs' totals side by side (changes against the first run) "
        "and write an HTML file with their req/s and p99 curves overlaid, "
        "aligned at their start.",
        epilog="example: loadfleet compare runs/A runs/B --out before-after.html",
    )
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR", help="two or more run directories")
    p.add_argument(
        "--out",
        type=Path,
        default=report.DEFAULT_COMPARE_FILE,
        metavar="FILE",
        help=f"HTML file to write (default {report.DEFAULT_COMPARE_FILE})",
    )
    p.add_argument("--json", action="store_true", help="print the table as JSON (the HTML is still written)")


async def handle(args: argparse.Namespace) -> int:
    return compare_runs(args.run_dirs, args.out, args.json)


def compare_runs(run_dirs: list[Path], out: Path, as_json: bool) -> int:
    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two run directories")
    runs = [report.load_run(d) for d in run_dirs]  # every run is read before anything is written
    written = report.write_compare(runs, out)
    if as_json:
        print(json.dumps({"runs": report.compare_rows(runs), "html": str(written)}, indent=2))
    else:
        print(report.compare_text(runs))
        print(f"wrote {written}")
    return EXIT_OK
