"""checks.csv: a journey's checks per interval, one row per (interval, target, request,
check) of the cluster — how many responses passed and failed each declared check and
extraction ("extract <variable>").

A row per check rather than a column per check keeps the header the same for every plan
(intervals.csv's `check_failed` and `check_pass_pct` are the checks of a row together).
Only the cluster's per-(target, request) rows are written: the `*` row merges the same
name of different requests, and the agents' rows add up to the cluster's. So an interval
writes O(targets × requests × 32 checks) rows, and a plan without checks none (the file is
not even made). A plan with scenarios has a `scenario` column after `interval_start_ms`.
"""

from __future__ import annotations

from collections.abc import Iterable

from loadfleet.wire.stats import StatsRow

CHECKS_FILE = "checks.csv"
CHECKS_COLUMNS = ("interval_start_ms", "target", "request", "check", "passed", "failed")


def checks_columns(scenarios: bool) -> list[str]:
    return [CHECKS_COLUMNS[0], *(["scenario"] if scenarios else []), *CHECKS_COLUMNS[1:]]


def check_csv_rows(start_ms: int, rows: Iterable[StatsRow], *, scenarios: bool = False) -> list[list[object]]:
    """The rows of one interval's cluster rows' checks, in their order and the plan's."""
    return [
        [start_ms, *([row.scenario] if scenarios else []), row.target, row.request, name, count.passed, count.failed]
        for row in rows
        for name, count in row.checks.items()
    ]
