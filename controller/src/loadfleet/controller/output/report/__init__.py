"""Reports people look at: `report.html` of one run and a comparison of runs, each one
self-contained HTML file (inline CSS, SVG and scripts, no external URL) built only from run
directories (summary.json, intervals.csv).

    rundata.py      a run directory read back (RunData)
    svg.py          the static line chart (what a browser without scripts shows)
    interactive.py  the same charts drawn by uPlot, embedded inline (charts.js): hover, zoom, toggles
    page.py         the page shell, tables, number formats
    html.py      report.html of one run
    checks.py    its "Checks" section (checktable.py: the table the console prints too;
                 checkseries.py: the worst checks over time, from checks.csv)
    compare.py   runs side by side (text, JSON, HTML)

Errors: an unreadable or missing run directory, or an output that cannot be written, is a
`UsageError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.output.report.compare import compare_rows, compare_text, render_compare
from loadfleet.controller.output.report.html import render_report
from loadfleet.controller.output.report.rundata import RunData, load_run

REPORT_FILE = "report.html"
DEFAULT_COMPARE_FILE = Path("compare.html")

__all__ = [
    "DEFAULT_COMPARE_FILE",
    "REPORT_FILE",
    "RunData",
    "compare_rows",
    "compare_text",
    "load_run",
    "write_compare",
    "write_report",
]


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write report.html of `run_dir` (to `out`, default RUN_DIR/report.html); returns its path."""
    run = load_run(Path(run_dir))
    target = Path(out) if out is not None else run.run_dir / REPORT_FILE
    write_file(target, render_report(run))
    return target


def write_compare(runs: Sequence[RunData], out: Path = DEFAULT_COMPARE_FILE) -> Path:
    write_file(Path(out), render_compare(runs))
    return Path(out)


def write_file(path: Path, text: str) -> None:
    """Written to a temporary name and renamed, so a browser never shows half a report."""
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
