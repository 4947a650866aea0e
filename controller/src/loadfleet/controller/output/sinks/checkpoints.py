"""The `check` measurement (docs/metrics.md): per interval, one point per check of each of the
cluster's (target, request) rows that checked a response in it, for Grafana's "Checks: pass
rate" panel and table. The responses that failed any check are the `http` point's
`check_failed`.

Only the cluster's rows: per agent would multiply the points by the fleet for what the agents'
`http` points already show (their `check_failed`). Points per interval are bounded by the plan:
its requests × targets × at most 32 checks and extractions a request (wire/stats.py)."""

from __future__ import annotations

from collections.abc import Iterable

from loadfleet.controller.output.sinks.lineproto import Field, Point
from loadfleet.controller.output.sinks.points import scenario_tag
from loadfleet.controller.stream.contract import Scope
from loadfleet.wire.stats import TOTAL, StatsRow


def check_points(*, run_id: str, step: str, interval_start_ms: int, rows: Iterable[StatsRow]) -> list[Point]:
    """A point per (row, check) with a response checked in the interval; the `*` rows are left
    out (the same check name on two requests is two checks, never one sum)."""
    points = []
    for row in rows:
        if row.target == TOTAL or row.request == TOTAL:
            continue
        for name, count in row.checks.items():
            pct = count.pass_pct
            if pct is None:  # judged no response: the pass rate of nothing is not 100 %, no point
                continue
            fields: tuple[Field, ...] = (("passed", count.passed), ("failed", count.failed), ("pass_pct", pct))
            points.append(
                Point(
                    "check",
                    tags=(
                        ("run", run_id),
                        ("step", step),
                        ("scope", Scope.CLUSTER.value),
                        *scenario_tag(row.scenario),
                        ("target", row.target),
                        ("request", row.request),
                        ("check", name),
                    ),
                    fields=fields,
                    time_ms=interval_start_ms,
                )
            )
    return points
