"""report.html's *Test data* section: a unique feed's rows by their state in ledger.csv.

Contract: `feed_section(run)` returns HTML elements; an empty list for a run without a unique
feed (or one taken over by a restarted controller, which writes no ledger).
"""

from __future__ import annotations

from loadfleet.controller.output.report.page import table
from loadfleet.controller.output.report.rundata import RunData

_WORDS = {"used": "used", "in_flight_at_loss": "in flight when their agent was lost", "unused": "never taken"}


def feed_section(run: RunData) -> list[str]:
    rows = run.summary_doc.feed_rows
    if not rows:
        return []
    total = sum(rows.values())
    return [
        "<h2>Test data</h2>",
        f"<p>The plan's unique feed: {total:,} rows, each in one state; ledger.csv lists every row with the "
        "agent that held it.</p>",
        table(
            ["rows", "state"],
            [[f"{n:,}", _WORDS.get(state, state)] for state, n in rows.items()],
            css_class="feed",
        ),
    ]
