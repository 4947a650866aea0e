"""A run directory read back for reports: `summary.json`, the rows of `intervals.csv`
that reports plot (see rundir.py for both formats), and from `plan.yaml` the driver and the
warm-up.

intervals.csv is read by intervalsread.py. Times are seconds since the load started
(`started_ms` of the summary), so runs line up at their start. Anything unreadable raises
`UsageError` with the file and the reason.
"""

from __future__ import annotations

import csv
import functools
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadfleet.controller.model.csvcells import read_cell
from loadfleet.controller.model.driver import DEFAULT_DRIVER
from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.model.summarydoc import Step, SummaryDoc
from loadfleet.controller.output.report.intervalsread import IntervalRow, read_intervals
from loadfleet.controller.output.report.summaryshape import summary_problem

SUMMARY_FILE = "summary.json"
INTERVALS_FILE = "intervals.csv"
HOSTS_FILE = "hosts.csv"  # monitored hosts, when the run had monitor-only agents
CONTROLLER_FILE = "controller.csv"  # the controller's own health, a line a second
PLAN_FILE = "plan.yaml"
UNKNOWN = "?"  # a run directory without a readable plan.yaml
GATLING_DIR = "gatling"  # agents' Gatling HTML reports, unpacked under <agent id>/
Points = tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class RunData:
    run_dir: Path
    summary: dict[str, Any]
    error_kinds: tuple[str, ...]
    cluster_total: tuple[IntervalRow, ...]
    cluster_rows: tuple[IntervalRow, ...]
    agent_totals: tuple[IntervalRow, ...]
    # host -> the host's CPU % and its server processes' CPU % over time
    host_cpu: dict[str, dict[str, Points]] = field(default_factory=dict)
    driver: str = DEFAULT_DRIVER  # engine or gatling
    warmup_s: float = 0.0  # a plain plan's warm-up, left out of its step's figures
    # Intervals per generator-health verdict ("valid", "suspect", "invalid"; "": runs before it).
    verdicts: dict[str, int] = field(default_factory=dict)
    # The controller's event-loop lag (its worst per second, ms) over time; runs before it: ().
    controller_lag: Points = ()
    # A plan with scenarios: each scenario's cluster totals over time (agent = its name).
    scenario_totals: tuple[IntervalRow, ...] = ()

    @functools.cached_property  # read once: a report asks for the run's start at every point it draws
    def summary_doc(self) -> SummaryDoc:
        """`summary` through the typed reader."""
        return SummaryDoc.of(self.summary)

    @property
    def measured_step(self) -> Step | None:
        """The figures a run without a sweep measured after its warm-up (its step `main`);
        None for a sweep, or a run without a warm-up (its totals are its figures)."""
        steps = self.summary_doc.steps
        if self.warmup_s <= 0 or len(steps) != 1:
            return None
        return steps[0]

    @property
    def run_id(self) -> str:
        run_id = self.summary_doc.run_id
        return str(run_id if run_id is not None else self.run_dir.name)

    @property
    def started_ms(self) -> int:
        started = self.summary_doc.started_ms or 0
        if not started and self.cluster_total:
            started = self.cluster_total[0].start_ms
        return int(started)

    @property
    def gatling_reports(self) -> tuple[Path, ...]:
        """The Gatling HTML reports collected into the run directory (each one's index.html)."""
        return tuple(sorted((self.run_dir / GATLING_DIR).glob("*/*/index.html")))

    def seconds(self, at_ms: int) -> float:
        return (at_ms - self.started_ms) / 1000

    def total_series(self, column: str) -> Points:
        return tuple((self.seconds(r.start_ms), r.values.get(column, float("nan"))) for r in self.cluster_total)

    def latency_series(self, column: str) -> Points:
        """Like total_series, but an interval without a response (none sent, or only
        transport errors, which have no latency) is a gap in the line, not a zero."""
        return tuple(
            (self.seconds(r.start_ms), r.values.get(column, float("nan")) if _responses(r) else float("nan"))
            for r in self.cluster_total
        )

    def by_target(self, column: str) -> dict[str, Points]:
        """`column` summed over requests, per target (for additive columns like rps)."""
        sums: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        for row in self.cluster_rows:
            sums[row.target][row.start_ms] += row.values.get(column, 0.0)
        return {
            target: tuple((self.seconds(t), v) for t, v in sorted(by_start.items()))
            for target, by_start in sorted(sums.items())
        }

    def by_scenario(self, column: str) -> dict[str, Points]:
        """A plan with scenarios: `column` of each scenario's totals over time."""
        series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for row in self.scenario_totals:
            series[row.agent].append((self.seconds(row.start_ms), row.values.get(column, float("nan"))))
        return {name: tuple(points) for name, points in series.items()}

    def by_agent(self, column: str) -> dict[str, Points]:
        series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for row in self.agent_totals:
            series[row.agent].append((self.seconds(row.start_ms), row.values.get(column, float("nan"))))
        return {agent: tuple(points) for agent, points in sorted(series.items())}


def _responses(row: IntervalRow) -> float:
    return sum(row.values.get(f"status_{c}xx", 0.0) for c in "12345")


def load_run(run_dir: Path) -> RunData:
    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    kinds, total, rows, agents, verdicts, scenarios = read_intervals(run_dir / INTERVALS_FILE)
    started_ms = int(SummaryDoc.of(summary).started_ms or (total[0].start_ms if total else 0))
    driver, warmup_s = _read_plan_facts(run_dir / PLAN_FILE)
    return RunData(
        run_dir=run_dir,
        summary=summary,
        error_kinds=kinds,
        cluster_total=total,
        cluster_rows=rows,
        agent_totals=agents,
        host_cpu=_read_host_cpu(run_dir / HOSTS_FILE, started_ms),
        driver=driver,
        warmup_s=warmup_s,
        verdicts=dict(verdicts),
        controller_lag=_read_controller_lag(run_dir / CONTROLLER_FILE, started_ms),
        scenario_totals=scenarios,
    )


def _read_plan_facts(path: Path) -> tuple[str, float]:
    """(driver, warmup_s) of the run's plan.yaml, as the controller wrote it; unknown when it
    is missing or unreadable (a report still shows everything else)."""
    try:
        plan = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return UNKNOWN, 0.0
    if not isinstance(plan, dict):
        return UNKNOWN, 0.0
    warmup_s = plan.get("warmup_s", 0)
    return (
        str(plan.get("driver", DEFAULT_DRIVER)),
        float(warmup_s) if isinstance(warmup_s, (int, float)) and not isinstance(warmup_s, bool) else 0.0,
    )


def _read_host_cpu(path: Path, started_ms: int) -> dict[str, dict[str, Points]]:
    """hosts.csv has one row per sample and process group: host and process CPU per sample."""
    if not path.is_file():
        return {}
    samples: dict[str, dict[int, tuple[float, float]]] = defaultdict(dict)
    try:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                at_ms, host = int(row["time_ms"]), read_cell(row["host"])
                _, process = samples[host].get(at_ms, (0.0, 0.0))
                samples[host][at_ms] = (float(row["cpu_pct"]), process + float(row["process_cpu_pct"] or 0))
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable: {exc!r}") from exc
    return {
        host: {
            column: tuple(((t - started_ms) / 1000, values[i]) for t, values in sorted(by_time.items()))
            for i, column in enumerate(("cpu_pct", "process_cpu_pct"))
        }
        for host, by_time in sorted(samples.items())
    }


def _read_controller_lag(path: Path, started_ms: int) -> Points:
    if not path.is_file():
        return ()
    try:
        with path.open(newline="") as f:
            return tuple(((int(r["time_ms"]) - started_ms) / 1000, float(r["loop_lag_ms"])) for r in csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable: {exc!r}") from exc


def read_summary(run_dir: Path) -> dict[str, Any]:
    if not run_dir.exists():
        raise UsageError(f"{run_dir}: no such run directory")
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: not a directory")
    path = run_dir / SUMMARY_FILE
    if not path.is_file():
        raise UsageError(
            f"{run_dir}: not a run directory with results (no {SUMMARY_FILE}; a run writes it when it ends)"
        )
    try:
        summary = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from exc
    if not isinstance(summary, dict) or not isinstance(summary.get("total"), dict) or "run_id" not in summary:
        raise UsageError(f"{path}: not a loadfleet run summary (no run_id or total)")
    problem = summary_problem(summary)
    if problem:
        raise UsageError(f"{path}: not a loadfleet run summary ({problem})")
    return summary
