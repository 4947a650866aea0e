"""The `feed_rows` measurement (docs/metrics.md): a unique feed's rows by their state in
ledger.csv, one point per state at the run's end, what summary.json's `feed_rows`, the console
and report.html's Test data show."""

from __future__ import annotations

from loadfleet.controller.output.sinks.lineproto import Point


def feed_points(*, run_id: str, rows: dict[str, int], at_ms: int) -> list[Point]:
    """A point per state (used, in_flight_at_loss, unused), stamped `at_ms` (the run's end): a
    state is one series, so a summary written again replaces its point."""
    return [
        Point("feed_rows", tags=(("run", run_id), ("state", state)), fields=(("rows", n),), time_ms=at_ms)
        for state, n in rows.items()
    ]
