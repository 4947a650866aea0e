"""Runs side by side: a table (text, JSON or HTML; each run after the first also shows
its change against the first, the baseline) and overlaid curves of req/s and p99 over
time, the runs aligned at their start. `gate_text` prints the regression gate's report
(`compare BASE CANDIDATE --gate ...`).

The figures are each run's totals, or, for a run without a sweep that had a warm-up
(`warmup_s`), those of its step: measured after the warm-up. The table says which driver
(engine or Gatling) each run used and what was measured."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from loadfleet.controller.model.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLD_FAILED
from loadfleet.controller.model.gateresult import GateOutcome, GateReport
from loadfleet.controller.model.summarydoc import Phases, Step
from loadfleet.controller.output import verdicttext
from loadfleet.controller.output.report import interactive
from loadfleet.controller.output.report.page import fmt_count, fmt_ms, fmt_pct, fmt_rate, page, table
from loadfleet.controller.output.report.rundata import RunData
from loadfleet.controller.output.report.svg import Chart, Series
from loadfleet.wire.phases import PHASE_NAMES

# (key in compare_rows, label, format); the keys are also the JSON keys.
METRICS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("requests", "requests", fmt_count),
    ("rps", "req/s", fmt_rate),
    ("mb_per_s", "MB/s", lambda v: f"{v:,.2f}"),
    ("error_pct", "err %", fmt_pct),
    ("mean_ms", "mean ms", fmt_ms),
    ("stddev_ms", "stddev ms", fmt_ms),
    ("p50_ms", "p50 ms", fmt_ms),
    ("p99_ms", "p99 ms", fmt_ms),
)
# Where a response's time went (summary.json's `phases`): each phase's share of the mean
# latency, and time to first byte's p99. None for a run whose driver measured no phase.
PHASE_METRICS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("queueing_ms", "queueing ms/response", fmt_ms),
    ("connect_ms", "connect ms/response", fmt_ms),
    ("tls_ms", "TLS ms/response", fmt_ms),
    ("waiting_ms", "waiting ms/response", fmt_ms),
    ("receiving_ms", "receiving ms/response", fmt_ms),
    ("other_ms", "other ms/response", fmt_ms),
    ("waiting_p99_ms", "time to first byte p99 ms", fmt_ms),
)


def compare_rows(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """One flat dict per run: identity, then every metric of METRICS and PHASE_METRICS (run
    totals, or the step measured after a warm-up)."""
    rows = []
    for run in runs:
        summary = run.summary_doc
        figures = summary.total.figures
        row = {
            "run_id": run.run_id,
            "run_dir": str(run.run_dir),
            "plan_name": summary.plan_name if summary.plan_name is not None else "",
            "state": summary.state if summary.state is not None else "",
            "duration_s": summary.duration_s,
            "driver": run.driver,
            "warmup_s": run.warmup_s,
        }
        for key, _, _ in METRICS:  # the counts and rates of the figures, the rest of their latency
            source = figures if hasattr(figures, key) else figures.latency  # None: no response, no latency
            row[key] = getattr(source, key) if source is not None else None
        row.update(_phase_metrics(figures.phases))
        step = run.measured_step
        if step is not None:
            row.update(_step_metrics(step))
            row.update(_phase_metrics(step.phases))
        row["measured"] = f"after a {run.warmup_s:g} s warm-up" if step is not None else "whole run"
        row["latency_missing"] = bool(figures.latency_missing)
        rows.append(row)
    return rows


def _step_metrics(step: Step) -> dict[str, Any]:
    """METRICS of a step's figures (steps.StepResult as summary.json holds it)."""

    def number(key: str) -> float:
        return float(getattr(step, key) or 0)

    return {
        "requests": int(number("requests")),
        "rps": number("achieved_rps"),
        "mb_per_s": number("bytes_per_s") / 1e6,
        "error_pct": number("error_pct"),
        **{key: number(key) for key in ("mean_ms", "stddev_ms", "p50_ms", "p99_ms")},
    }


def _phase_metrics(phases: Phases | None) -> dict[str, Any]:
    """PHASE_METRICS of a `phases` entry (figures.PhaseFigures as summary.json holds it;
    rundata checked that it holds numbers)."""
    if not phases:
        return {key: None for key, _, _ in PHASE_METRICS}
    shares = {f"{name}_ms": phases.phase(name).per_response_ms for name in PHASE_NAMES}
    return {**shares, "other_ms": phases.other_ms, "waiting_p99_ms": phases.waiting_p99_ms}


def change(base: float, value: float) -> str:
    """`+3.1%` against the baseline; empty when the baseline is zero."""
    if not base:
        return ""
    return f"{(value - base) / base * 100:+.1f}%"


def _grid(runs: Sequence[RunData]) -> tuple[list[str], list[list[str]]]:
    """Header and rows (one per metric, one column per run) shared by text and HTML."""
    rows = compare_rows(runs)
    header = ["", *(r["run_id"] for r in rows)]
    grid = [
        ["plan", *(str(r["plan_name"]) for r in rows)],
        ["driver", *(str(r["driver"]) for r in rows)],
        ["state", *(str(r["state"]) for r in rows)],
        ["duration s", *(f"{float(r['duration_s']):g}" for r in rows)],
    ]
    if any(r["warmup_s"] for r in rows):
        grid.append(["measured", *(str(r["measured"]) for r in rows)])
    measured_phases = any(r["waiting_ms"] is not None for r in rows)
    for key, label, fmt in (*METRICS, *(PHASE_METRICS if measured_phases else ())):
        base = rows[0][key]
        cells = []
        for r in rows:
            if r[key] is None:  # no phase measured in this run, or no response to time
                cells.append("-")
                continue
            delta = change(base, r[key]) if base is not None and r is not rows[0] else ""
            cells.append(f"{fmt(r[key])} ({delta})" if delta else fmt(r[key]))
        grid.append([label, *cells])
    if any(r["latency_missing"] for r in rows):  # a Gatling simulation without the hook
        grid.append(
            ["latency", *("not measured for some requests" if r["latency_missing"] else "measured" for r in rows)]
        )
    return header, grid


def compare_text(runs: Sequence[RunData]) -> str:
    header, grid = _grid(runs)
    widths = [max(len(line[i]) for line in (header, *grid)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
        for line in (header, *grid)
    ]
    return "\n".join(lines) + "\n(changes are against the first run)"


def render_compare(runs: Sequence[RunData]) -> str:
    header, grid = _grid(runs)
    names = _series_names(runs)
    rps = tuple(Series(n, r.total_series("rps")) for n, r in zip(names, runs))
    p99 = tuple(Series(n, r.latency_series("p99_ms")) for n, r in zip(names, runs))
    body = [
        "<h1>loadfleet: " + escape(", ".join(r.run_id for r in runs)) + "</h1>",
        "<h2>Totals</h2>",
        table(header, grid, css_class="compare"),
        "<p>Changes in brackets are against the first run.</p>",
        "<h2>Over time (runs aligned at their start)</h2>",
        interactive.hint(),
        '<div class="charts">',
        interactive.figure(Chart("Requests/s (cluster)", "req/s", rps)),
        interactive.figure(Chart("p99 latency (cluster)", "ms", p99)),
        "</div>",
        "<h2>Runs</h2>",
        table(
            ("run", "plan", "directory"),
            [[r.run_id, _plan_name(r), str(r.run_dir)] for r in runs],
        ),
    ]
    return page("loadfleet compare", "\n".join(body), interactive.scripts())


def _plan_name(run: RunData) -> str:
    name = run.summary_doc.plan_name
    return str(name if name is not None else "")


def _series_names(runs: Sequence[RunData]) -> list[str]:
    """Run ids, made unique when the same run is given twice."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.run_id] = seen.get(run.run_id, 0) + 1
        names.append(run.run_id if seen[run.run_id] == 1 else f"{run.run_id} #{seen[run.run_id]}")
    return names


_GATE_VERDICT = {
    EXIT_OK: "gate passed (exit 0): no gated figure got worse beyond its tolerance",
    EXIT_THRESHOLD_FAILED: "REGRESSION (exit 4): {figures} got worse beyond the tolerance",
    EXIT_INCONCLUSIVE: "INCONCLUSIVE (exit 5): the runs cannot tell ({figures}); nothing regressed",
}


def gate_text(report: GateReport, *, inconclusive_ok: bool = False) -> str:
    """The gate as a table (a row per gated figure: base, candidate, change, its 95 % interval,
    the verdict), why the runs could not be compared (when so), the method and the verdict line."""
    header = [*verdicttext.GATE_HEADERS, "verdict"]
    grid = [[*verdicttext.gate_cells(f), f.outcome.value] for f in report.figures]
    widths = [max(len(row[i]) for row in (header, *grid)) for i in range(len(header))]
    lines = [f"base {report.base_run}, candidate {report.candidate_run}"]
    lines += [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in (header, *grid)
    ]
    lines += [f"  {f.figure} {f.tolerance}: {f.reason}" for f in report.figures if f.reason]
    lines += [f"not comparable: {r}" for r in report.inconclusive_reasons]
    lines += [f"method: {report.method}", _gate_verdict(report, inconclusive_ok)]
    return "\n".join(lines)


def _gate_verdict(report: GateReport, inconclusive_ok: bool) -> str:
    code = report.exit_code
    wanted = GateOutcome.REGRESSION if code == EXIT_THRESHOLD_FAILED else GateOutcome.INCONCLUSIVE
    named = ", ".join(f"{f.figure} {f.tolerance}" for f in report.figures if f.outcome is wanted)
    line = _GATE_VERDICT[code].format(figures=named or "the runs are not comparable")
    if code == EXIT_INCONCLUSIVE and inconclusive_ok:
        line += "; exit 0 (--inconclusive-ok)"
    return line
