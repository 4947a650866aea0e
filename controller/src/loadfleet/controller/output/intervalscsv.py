"""The rows of intervals.csv: its columns and each row's cells (rundir.py writes them).

A plan with scenarios has a `scenario` column after `agent` (one more column, so a plain
plan's file is as it was); its rows carry their scenario's name, and each scenario's own
total is a row (scenario, *, *) beside the interval's (*, *, *).
"""

from __future__ import annotations

from loadfleet.controller.model.figures import PERCENTILES, WAITING_PERCENTILES, Figures, Latency
from loadfleet.controller.stream.contract import Scope
from loadfleet.wire.phases import PHASE_NAMES
from loadfleet.wire.stats import COUNTED_ERROR_KINDS, StatsRow, error_kind_name

INTERVAL_COLUMNS = (
    [
        "interval_start_ms",
        "scope",
        "agent",
        "target",
        "request",
        "requests",
        "ok",
        "failed",
        # Responses that failed a check (in `failed`), and every declared check's pass %
        # together (empty when the row's request declares none; each check: checks.csv).
        "check_failed",
        "check_pass_pct",
        "status_1xx",
        "status_2xx",
        "status_3xx",
        "status_4xx",
        "status_5xx",
    ]
    + [f"err_{error_kind_name(k)}" for k in COUNTED_ERROR_KINDS]
    + [
        "bytes_in",
        "bytes_out",
        "conns_opened",
        "conns_closed",
        "active_conns",
        "users",
        # HTTP/2 streams open at the interval's end (a gauge like users; 0 on HTTP/1.1).
        "active_streams",
        "rps",
        "ok_rps",
        "mb_per_s",
        "mean_ms",
        "stddev_ms",
        "min_ms",
    ]
    + [f"{name}_ms" for name, _ in PERCENTILES]
    + ["max_ms", "scheduled", "sent_late", "max_send_lag_ms", "not_sent"]
    # Redirect hops followed by the row's requests (plan `redirects`).
    + ["redirects"]
    # Phases: count, exact sum and max per phase (sums and counts add up across rows and
    # intervals; docs/results.md), then percentiles of waiting. Zero when not measured.
    + [f"{name}_{what}" for name in PHASE_NAMES for what in ("count", "sum_ms", "max_ms")]
    + [f"waiting_{name}_ms" for name, _ in WAITING_PERCENTILES]
    # The interval's generator-health verdict (genbound.py): the cluster's on cluster rows,
    # the agent's own on its rows. Text, last (report/rundata.py reads the numbers before).
    + ["validity", "validity_reasons"]
)


def interval_columns(scenarios: bool) -> list[str]:
    """The header: with `scenarios`, a `scenario` column after `agent`."""
    if not scenarios:
        return INTERVAL_COLUMNS
    at = INTERVAL_COLUMNS.index("agent") + 1
    return [*INTERVAL_COLUMNS[:at], "scenario", *INTERVAL_COLUMNS[at:]]


def interval_cells(start: int, scope: Scope, agent: str, row: StatsRow, f: Figures, *, scenarios: bool) -> list[object]:
    """A row's cells before its verdict's (the last two columns)."""
    cells = _csv_row(start, scope, agent, row, f)
    if scenarios:
        cells.insert(3, row.scenario)
    return cells


def _csv_row(start: int, scope: Scope, agent: str, row: StatsRow, f: Figures) -> list[object]:
    return [
        start,
        scope.value,
        agent,
        row.target,
        row.request,
        row.requests,
        row.ok,
        row.failed,
        f.check_failed,
        "" if f.check_pass_pct is None else round(f.check_pass_pct, 3),
        *row.status,
        *(row.errors.get(k, 0) for k in COUNTED_ERROR_KINDS),
        row.bytes_in,
        row.bytes_out,
        row.connections_opened,
        row.connections_closed,
        row.active_connections,
        row.users,
        row.active_streams,
        round(f.rps, 3),
        round(f.ok_rps, 3),
        round(f.mb_per_s, 6),
        *_latency_cells(f.latency),
        row.scheduled,
        row.sent_late,
        round(row.max_send_lag_us / 1000, 3),
        row.not_sent,
        row.redirects,
        *_phase_cells(row, f),
    ]


# The latency of nothing (no response carried one) is empty cells, not zeros.
_NO_LATENCY: list[object] = [""] * (len(PERCENTILES) + 4)


def _latency_cells(lat: Latency | None) -> list[object]:
    """mean, stddev, min, the PERCENTILES and max, in ms."""
    if lat is None:
        return _NO_LATENCY
    return [
        round(lat.mean_ms, 3),
        round(lat.stddev_ms, 3),
        round(lat.min_ms, 3),
        *(round(getattr(lat, f"{name}_ms"), 3) for name, _ in PERCENTILES),
        round(lat.max_ms, 3),
    ]


_NO_PHASES: list[object] = [0] * (3 * len(PHASE_NAMES) + len(WAITING_PERCENTILES))


def _phase_cells(row: StatsRow, f: Figures) -> list[object]:
    if row.phases is None or f.phases is None:
        return _NO_PHASES
    cells = []
    for name in PHASE_NAMES:
        phase = getattr(row.phases, name)
        cells += [phase.count, phase.sum_us / 1000, phase.max_us / 1000]
    return cells + [getattr(f.phases, f"waiting_{name}_ms") for name, _ in WAITING_PERCENTILES]
