"""steps.csv: one row per step, with its phases, the saturated resource the monitors saw, and
each target's figures. A plan with scenarios has a `scenario` column after `step`: the
step's row over every scenario is `*`, and a row per scenario that ran in the step follows it
with that scenario's figures (SCENARIO_COLUMNS; the step's other columns are the step's
where they place it, empty where they are the whole step's)."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, fields

from loadfleet.controller.model.csvcells import safe_row
from loadfleet.controller.model.figures import WAITING_PERCENTILES, PhaseFigures
from loadfleet.controller.model.stepresult import ScenarioStepResult, StepResult, TargetFigures
from loadfleet.wire.phases import PHASE_NAMES

STEP_COLUMNS = (
    "step",
    "level",
    "servers",
    "level_index",
    "repetition",
    "offered",
    "state",
    "start_ms",
    "measured_s",
    "intervals",
    "requests",
    "ok",
    "achieved_rps",
    "ok_rps",
    "bytes_per_s",
    "mean_ms",
    "stddev_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "error_pct",
    "new_conns_per_s",
    "concurrent_conns",
    "concurrent_users",
    "peak_users",
    "rps_per_server",
    "generator_bound",
    "generator_bound_intervals",
    "losses",
    "validity",
    "invalid_intervals",
    "suspect_intervals",
    "validity_reasons",
    "bottleneck",
)


# Where a response's time went (StepResult.phases): each phase's share of the mean latency,
# what no phase covers (the five add up to mean_ms), and time to first byte's percentiles.
# Empty when the driver measured no phase.
PHASE_COLUMNS = (
    *(f"{name}_per_response_ms" for name in PHASE_NAMES),
    "other_ms",
    *(f"waiting_{name}_ms" for name, _ in WAITING_PERCENTILES),
)


def phase_values(phases: PhaseFigures) -> dict[str, float]:
    """PHASE_COLUMNS of a step's phases, by name (steps.csv, the step point)."""
    return {
        **{f"{name}_per_response_ms": getattr(phases, name).per_response_ms for name in PHASE_NAMES},
        "other_ms": phases.other_ms,
        **{f"waiting_{name}_ms": getattr(phases, f"waiting_{name}_ms") for name, _ in WAITING_PERCENTILES},
    }


def phase_cells(phases: PhaseFigures | None) -> list[object]:
    """PHASE_COLUMNS of a step's phases as steps.csv cells (empty without phases)."""
    if phases is None:
        return [""] * len(PHASE_COLUMNS)
    return [_cell(v) for v in phase_values(phases).values()]


# A step's latency columns: empty cells, not 0 ms, when no response of the step carried a
# latency (its figures' latency is None: the latency of nothing, as summary.json's null and
# intervals.csv's empty cells).
LATENCY_COLUMNS = ("mean_ms", "stddev_ms", "p50_ms", "p90_ms", "p99_ms")


# Per target of the plan, these of its figures get a `<figure> <url>` column in steps.csv.
TARGET_COLUMNS = ("rps", "mean_ms", "p99_ms", "error_pct")


# A scenario's row (plan `scenarios:`): the columns that place its step, and its own figures.
STEP_PLACE_COLUMNS = ("level", "servers", "level_index", "repetition", "state", "start_ms")
SCENARIO_COLUMNS = tuple(c for c in STEP_COLUMNS if c in {f.name for f in fields(ScenarioStepResult)})


def steps_csv(results: list[StepResult], target_urls: list[str], *, scenarios: bool = False) -> str:
    """One row per step: STEP_COLUMNS and PHASE_COLUMNS; then `rps <url>`, `mean_ms <url>`,
    `p99_ms <url>` and `error_pct <url>` per target of the plan (empty when the step did not
    use it), and `cpu_pct <host>` and `server_cpu_pct <host>` per monitored host. With
    `scenarios`, a `scenario` column and a row per scenario of each step."""
    hosts = sorted({h.host for r in results for h in r.hosts})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header: list[object] = [
        *STEP_COLUMNS,
        *PHASE_COLUMNS,
        *(f"{column} {url}" for url in target_urls for column in TARGET_COLUMNS),
        *(f"{column} {host}" for host in hosts for column in ("cpu_pct", "server_cpu_pct")),
    ]
    writer.writerow(safe_row(_with_scenario(header, "scenario") if scenarios else header))
    for r in results:
        row = _step_row(r, target_urls, hosts)
        if not scenarios:
            writer.writerow(safe_row(row))
            continue
        writer.writerow(safe_row(_with_scenario(row, "*")))
        for s in r.scenarios:
            figures = asdict(s)
            if not s.latency_measured:
                figures.update(dict.fromkeys(LATENCY_COLUMNS, ""))
            cells = {"step": r.name, **{c: _cell(getattr(r, c)) for c in STEP_PLACE_COLUMNS}}
            cells.update({c: _cell(figures[c]) for c in SCENARIO_COLUMNS})
            own = [cells.get(c, "") for c in STEP_COLUMNS] + [""] * (len(header) - len(STEP_COLUMNS))
            writer.writerow(safe_row(_with_scenario(own, s.name)))
    return out.getvalue()


def _with_scenario(row: list[object], scenario: object) -> list[object]:
    """`row` with its scenario after the step's name."""
    return [row[0], scenario, *row[1:]]


def _step_row(r: StepResult, target_urls: list[str], hosts: list[str]) -> list[object]:
    """A step's cells over all its load (STEP_COLUMNS, PHASE_COLUMNS, targets, hosts)."""
    doc = asdict(r)
    doc["step"] = r.name
    doc["rps_per_server"] = r.rps_per_server
    # The saturated resource in words (summary.json keeps its parts); empty when none was seen.
    doc["bottleneck"] = r.bottleneck.describe() if r.bottleneck else ""
    if r.figures().latency is None:
        doc.update(dict.fromkeys(LATENCY_COLUMNS, ""))
    row = [_cell(doc[c]) for c in STEP_COLUMNS] + phase_cells(r.phases)
    by_url = {t.url: t for t in r.targets}
    row += [_target_cell(by_url[u], c) if u in by_url else "" for u in target_urls for c in TARGET_COLUMNS]
    loads = {h.host: h for h in r.hosts}
    row += [
        _cell(getattr(loads[host], field)) if host in loads else ""
        for host in hosts
        for field in ("cpu_pct", "process_cpu_pct")
    ]
    return row


def _target_cell(t: TargetFigures, column: str) -> object:
    """A target's figure in a step; its latency of nothing an empty cell (LATENCY_COLUMNS)."""
    if column in LATENCY_COLUMNS and not t.latency_measured:
        return ""
    return _cell(getattr(t, "achieved_rps" if column == "rps" else column))


def _cell(v: object) -> object:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return round(v, 3) if math.isfinite(v) else ""
    return v
