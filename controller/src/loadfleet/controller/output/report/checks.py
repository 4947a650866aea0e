"""report.html's "Checks": the run's checks worst first (the console's table: checktable.py),
failed ones in red, the users the plan's rules stopped and the sessions they restarted, the
redirect hops the requests followed (plan `redirects`: their responses are the last hops'), and
the pass rate over time — of every check together (intervals.csv's `check_pass_pct`) and of
the worst checks each (checks.csv, checkseries.py).

Contract: `checks_section(run)` returns HTML elements; an empty list for a run whose plan
checks nothing (and for runs from before checks).
"""

from __future__ import annotations

from html import escape

from loadfleet.controller.output.report import interactive
from loadfleet.controller.output.report.checkseries import worst_check_series
from loadfleet.controller.output.report.checktable import CHECK_HEADERS, check_lines_of, check_table, overall, pct_text
from loadfleet.controller.output.report.page import table
from loadfleet.controller.output.report.rundata import RunData
from loadfleet.controller.output.report.svg import Chart, Series

# Checks drawn on their own over time (the worst by failures); the others are in "all checks".
MAX_CHECK_LINES = 9


def checks_section(run: RunData) -> list[str]:
    lines = check_lines_of(run.summary_doc)
    stopped = _stopped_text(run)
    if not lines and not stopped:
        return []
    section = ["<h2>Checks</h2>"]
    if lines:
        shown = check_table(lines)
        every = overall(lines)
        section += [
            f"<p>{every.passed:,} passed, {every.failed:,} failed: {escape(pct_text(every.pass_pct))} % of the "
            "checks passed. A response that fails a check is not ok: it counts in the errors, not in ok/s.</p>",
            table(
                CHECK_HEADERS,
                [list(c.cells()) for c in shown.rows],
                css_class="checks",
                row_classes=["failed" if c.failed else "" for c in shown.rows],
            ),
            *([f'<p class="note">{escape(shown.more_text)}</p>'] if shown.more else []),
            interactive.figure(pass_rate_chart(run)),
        ]
    section += [f"<p>{escape(stopped)}</p>"] if stopped else []
    return section


def pass_rate_chart(run: RunData) -> Chart:
    """Every check together (the cluster's, per interval), and the worst checks each."""
    every = Series("all checks", run.total_series("check_pass_pct"))
    return Chart(
        "Checks: pass % over time (cluster)",
        "% passed",
        (every, *worst_check_series(run.run_dir, run.started_ms, MAX_CHECK_LINES)),
    )


def _stopped_text(run: RunData) -> str:
    total = run.summary_doc.total.figures
    stopped, restarted = total.users_stopped, total.sessions_restarted
    said = []
    if stopped or restarted:
        said.append(f"Users stopped by the plan's rules: {stopped:,}; sessions restarted: {restarted:,}.")
    if total.redirects:
        said.append(
            f"Redirects followed: {total.redirects:,} (checks judged the last hop's response; latency, "
            "phases and bytes include every hop)."
        )
    return " ".join(said)
