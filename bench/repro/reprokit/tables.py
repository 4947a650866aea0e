"""Markdown of a study's stored evidence: its cells per level with the passes' spread, its runs,
and the verdicts. Written to docs/reproductions/<study>/tables.md, which docs/reproductions.md
links to (the doc's "our runs" numbers come from here, not from hand-copied tables)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from .evaluate import Grain, Observation
from .evidence import run_step_observations, step_observation
from .verdicts import Status, Verdict, format_value

COLUMNS = (
    ("ok_rps", "ok/s", "{:,.1f}"),
    ("mean_ms", "mean ms", "{:,.2f}"),
    ("p99_ms", "p99 ms", "{:,.1f}"),
    ("error_pct", "error %", "{:.2f}"),
)


def _spread(values: list[float], fmt: str) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(statistics.stdev(values))}"


def _level_label(variables: dict, names: list[str]) -> str:
    def plain(value) -> str:
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

    return ", ".join(f"{n}={plain(variables[n])}" for n in names if n in variables)


def _run_steps(cell: dict, summary: dict, study_dir: Path | None) -> list[Observation]:
    """A run's step observations, with its failures after the windows when its files are at hand."""
    run_dir = Path(study_dir) / str(cell.get("run_id")) if study_dir else None
    if run_dir and run_dir.is_dir():
        return run_step_observations(run_dir, cell, summary)
    return [step_observation(cell, step, summary.get("losses") or []) for step in summary.get("steps", [])]


def _count(passes: dict, attr: str) -> int:
    return sum(1 for obs in passes.values() for o in obs if getattr(o, attr))


def cells_table(runs: list[tuple[dict, dict]], study_dir: Path | None = None) -> str:
    """Per cell and level: each figure as mean ± sample stddev over the passes, the per-pass means."""
    per_pass = defaultdict(lambda: defaultdict(list))  # (cell, level) -> pass -> observations
    order = []
    for cell, summary in runs:
        level_names = list(cell.get("level_vars", [])) + list(cell.get("step_vars", {}))
        level_names += [k for k in (cell.get("levels") or [{}])[0] if k not in level_names]
        for obs in _run_steps(cell, summary, study_dir):
            key = (cell["cell"], _level_label(obs.vars, level_names))
            if key not in order:
                order.append(key)
            per_pass[key][obs.pass_no].append(obs)
    header = (
        ["cell", "level", "passes"]
        + [label for _, label, _ in COLUMNS]
        + ["mean ms per pass", "generator-bound", "engine lost after the window", "passes left out"]
        + ["invalid (excluded)", "no request under load (cell fails)", "failed after the window"]
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    cells = list(dict.fromkeys(cell for cell, _ in order))
    for key in sorted(order, key=lambda k: cells.index(k[0])):  # grouped by cell, levels as run
        ran = per_pass[key]
        left_out = sorted({o.left_out for obs in ran.values() for o in obs if o.left_out and not o.fails_cell})
        n_left = sum(all(o.left_out and not o.fails_cell for o in obs) for obs in ran.values())
        passes = {p: [o for o in obs if o.usable] for p, obs in ran.items()}
        passes = {p: obs for p, obs in passes.items() if obs}
        means = {
            name: [
                statistics.mean(o.figures[name] for o in obs if name in o.figures) for _, obs in sorted(passes.items())
            ]
            for name, _, _ in COLUMNS
        }
        bound = sum(any(o.figures.get("generator_bound") for o in obs) for obs in passes.values())
        row = [key[0], key[1], f"{len(passes)} of {len(ran)}"]
        row += [_spread(means[name], fmt) for name, _, fmt in COLUMNS]
        late = sum(any(o.figures.get("lost_after_window") for o in obs) for obs in passes.values())
        row += [
            " / ".join(f"{v:,.2f}" for v in means["mean_ms"]),
            f"{bound} of {len(passes)}",
            f"{late} of {len(passes)}",
            f"{n_left} ({'; '.join(left_out)})" if n_left else "0",
            str(_count(ran, "invalid")),
            str(_count(ran, "fails_cell")),
            " / ".join(f"{o.figures.get('late_failed', 0):,.0f}" for obs in ran.values() for o in obs),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def runs_table(runs: list[tuple[dict, dict]]) -> str:
    lines = [
        "| run | cell | pass | started (UTC) | load 1 min | CPU idle before % | servers | generator CPUs | state "
        "| steps |",
        "|---|---|---:|---|---:|---:|---|---|---|---:|",
    ]
    for cell, summary in sorted(runs, key=lambda r: r[0].get("started_utc", "")):
        load, idle = cell.get("loadavg_1m"), cell.get("idle_pct_before")
        lines.append(
            f"| `{cell.get('run_id')}` | {cell.get('cell')} | {cell.get('pass')} | {cell.get('started_utc', '')} "
            f"| {'' if load is None else f'{load:.1f}'} | {'' if idle is None else f'{idle:.0f}'} "
            f"| {cell.get('servers_before', 'not recorded')} | {cell.get('generator_cpus') or 'not pinned'} "
            f"| {summary.get('state')} | {len(summary.get('steps', []))} |"
        )
    return "\n".join(lines)


# The time series in tables.md: per cell, the mean of these per-interval figures over each bin
# of TIME_BINS bins spanning the runs' t (the paper's seconds), over all passes.
TIME_FIGURES = (
    ("concurrent_users", "users", "{:,.0f}"),
    ("ok_rps", "ok/s", "{:,.0f}"),
    ("error_rps", "errors/s", "{:,.0f}"),
)
TIME_BINS = 12


def time_table(observations: Sequence[Observation]) -> str:
    """The runs' intervals over time (t binned), a column per cell and figure; empty without any."""
    timed = [o for o in observations if o.grain is Grain.INTERVAL]
    if not timed:
        return ""
    span = max(float(o.vars["t"]) for o in timed) or 1.0
    width = max(1, math.ceil(span / TIME_BINS / 5) * 5)  # bins of a round number of seconds
    sums: dict = defaultdict(lambda: defaultdict(list))  # (cell, figure) -> bin -> values
    cells = []
    for o in timed:
        cell = ", ".join(str(v) for k, v in o.vars.items() if k != "t")
        cells += [cell] if cell not in cells else []
        for name, _, _ in TIME_FIGURES:
            if name in o.figures:
                sums[(cell, name)][int(float(o.vars["t"]) // width)].append(o.figures[name])
    columns = [(cell, name, label, fmt) for cell in cells for name, label, fmt in TIME_FIGURES if (cell, name) in sums]
    lines = [
        "| t (s) | " + " | ".join(f"{cell} {label}" for cell, _, label, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for b in range(int(span // width) + 1):
        values = [sums[(cell, name)].get(b) for cell, name, _, _ in columns]
        cells_text = [fmt.format(statistics.mean(v)) if v else "" for v, (_, _, _, fmt) in zip(values, columns)]
        lines.append(f"| {b * width}–{(b + 1) * width} | " + " | ".join(cells_text) + " |")
    return "\n".join(lines)


def verdict_row(verdict: Verdict) -> str:
    finding = verdict.finding
    threshold = finding.threshold
    if finding.comparison == "between":
        wanted = f"within [{threshold[0]}, {threshold[1]}]"
    else:
        wanted = f"{finding.comparison} {threshold}"
    held, evaluated = verdict.passes_holding()
    passes = f"{held} of {evaluated}" if evaluated else ""
    shown = verdict.value is not None and verdict.status is not Status.NOT_EVALUABLE
    value = format_value(verdict.value) if shown else ""  # None: a cell failed before any value
    status = f"**{verdict.status.value}**" if verdict.status is Status.FAILS else verdict.status.value
    reason = verdict.reason.replace("|", "\\|")
    return f"| `{finding.id}` | {wanted} | {status} | {value} | {passes} | {reason} |"


def verdicts_table(verdicts: list[Verdict]) -> str:
    lines = [
        "| finding | wanted | verdict | value (means over passes) | passes holding "
        "| how judged, or why not evaluable |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + [verdict_row(v) for v in verdicts])


def study_tables(
    study_id: str,
    title: str,
    runs: list[tuple[dict, dict]],
    verdicts: list[Verdict],
    note: str = "",
    observations: Sequence[Observation] = (),
    study_dir: Path | None = None,
) -> str:
    passes = sorted({c.get("pass") for c, _ in runs})
    starts = sorted(c.get("started_utc", "") for c, _ in runs)
    loads = [c["loadavg_1m"] for c, _ in runs if c.get("loadavg_1m") is not None]
    counts = {s: sum(v.status is s for v in verdicts) for s in Status}
    parts = [
        f"# Study {study_id}: our runs",
        "",
        f"{title}. Generated by `python -m bench.repro.reproduce {study_id} --tables` from the runs stored in this",
        "directory (each run's `summary.json`, `steps.csv`, `plan.yaml`, `cell.json` and, once kept,",
        "`cluster_intervals.csv`); do not edit by hand.",
        "",
        f"{len(runs)} runs in {len(passes)} passes, {starts[0] if starts else '-'} to {starts[-1] if starts else '-'};"
        + (f" load average (1 min) at their starts {min(loads):.1f}–{max(loads):.1f}." if loads else ""),
        f"Verdicts: {counts[Status.HOLDS]} hold, {counts[Status.FAILS]} fail, "
        f"{counts[Status.NOT_ENOUGH_PASSES]} have not enough passes, "
        f"{counts[Status.NOT_EVALUABLE]} cannot be evaluated.",
    ]
    if note:
        parts += ["", f"Note: {note}."]
    parts += [
        "",
        "## Cells",
        "",
        "Each figure is the mean over the passes ± its sample standard deviation (the passes' spread); "
        '"passes": passes whose step is used, of the passes that ran it; a step that failed during '
        "its measured intervals (an agent's engine lost, so its load was not the level's) or measured "
        "nothing with no load offered is left out, and the figures are over the others. "
        '"engine lost after the window": '
        "steps marked failed only because an engine was killed as silent after the measured intervals "
        "had ended (while draining slow requests at the step's end); their figures are whole and used. "
        '"invalid": steps loadfleet marked invalid (generator-bound, too few intervals, ...), excluded '
        'from every figure and counted in the verdicts. "no request under load": steps that measured '
        '0 requests while load was offered; a finding that reads their cell fails. "failed after the '
        'window": per step, in run order, the failures after its measured window attributed to it '
        "(from the run's intervals, or its totals as an upper bound: bench/repro/reprokit/late.py); "
        '"error %" counts them.',
        "",
        "Verdicts are strict: a finding holds only when it holds in every pass of at least three (or the "
        'passes\' 95 % interval excludes its threshold); with fewer it is "not enough passes".',
        "",
        cells_table(runs, study_dir),
        "",
    ]
    over_time = time_table(observations)
    if over_time:
        parts += [
            "## Over time",
            "",
            "The runs' intervals (`cluster_intervals.csv`) by `t`, the paper's seconds (the study's "
            "note says how a run's seconds map to them): per cell the mean over the passes' intervals "
            "in each bin of users in progress at interval ends, ok responses/s and failed requests/s. "
            "Each run's last interval (its drain) is left out.",
            "",
            over_time,
            "",
        ]
    parts += [
        "## Verdicts",
        "",
        verdicts_table(verdicts),
        "",
        "## Runs",
        "",
        runs_table(runs),
        "",
    ]
    return "\n".join(parts)
