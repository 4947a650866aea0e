"""The run directory `runs/<run-id>/`, written as the run goes.

plan.yaml at the start; then, appended and flushed as each interval is published:
intervals.csv (one row per interval per scope: `cluster` rows merge all agents, `agent`
rows are one agent's; within a scope a row per (target, request) and a `*`,`*` row for the
whole interval), latency.hlog (the same intervals' latency histograms in microseconds, in
the standard HdrHistogram log format, tagged `cluster`, `scenario:<name>` or `agent:<id>`, so that any
percentile can be recomputed or merged later; each row ends with the interval's
generator-health verdict and its reasons, `validity` and `validity_reasons`; with very many
agents, `StepWindow.agent_detail` off, agents' rows are their totals only and the log has the
cluster's lines only), checks.csv (a journey's checks, a row per check of each of the
cluster's (target, request) rows: checkscsv.py; made when the first check is counted),
events.jsonl (one run event per line), hosts.csv and host_counters.csv (monitored hosts'
samples), controller.csv (the controller's own health, a line a second: selfwatch.py);
steps.csv after each step; summary.json and report.html at the end. `gatling/<agent>/`
holds each agent's Gatling HTML report when the plan asks for it (artifacts.py). journal/ is
the controller's own record for recovering the run after a crash (journal.py).

Everything is appended as it is known, by the run's disk thread (diskwriter.py): after the
controller dies (even `kill -9`), the directory holds every interval published before.
Whole files (plan.yaml, steps.csv, summary.json) are written to a temporary name and
renamed, so a reader never sees half a file. A write that fails (a full disk) leaves that
file as far as it was complete and the run going on (rundisk.py).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from loadfleet.controller.analysis.hosts import COUNTERS_CSV_HEADER, HOSTS_CSV_HEADER, counter_csv_rows, host_csv_rows
from loadfleet.controller.analysis.summary import RunSummary
from loadfleet.controller.model.csvcells import safe_row
from loadfleet.controller.model.errors import LoadfleetError
from loadfleet.controller.model.events import Event
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.selfsample import CONTROLLER_CSV_HEADER, ControllerSample
from loadfleet.controller.model.stepresult import StepResult
from loadfleet.controller.model.verdict import VALID
from loadfleet.controller.output.checkscsv import CHECKS_FILE, check_csv_rows, checks_columns
from loadfleet.controller.output.diskwriter import DiskWriter
from loadfleet.controller.output.intervalscsv import interval_cells, interval_columns
from loadfleet.controller.output.report import REPORT_FILE, write_report
from loadfleet.controller.output.rundisk import AppendFile, DiskTrouble
from loadfleet.controller.output.stepscsv import steps_csv
from loadfleet.controller.plan.redact import redact_plan_yaml
from loadfleet.controller.stream.contract import FinalInterval, Scope, StepEnd, StepWindow
from loadfleet.wire.stats import StatsRow

log = logging.getLogger(__name__)


def write_atomic(path: Path, text: str) -> None:
    """The whole file, or (OSError) the earlier version of it, if any."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def write_plan(run_dir: Path, plan_yaml: str, trouble: DiskTrouble | None = None) -> None:
    trouble = trouble or DiskTrouble(run_dir)

    def write() -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / "plan.yaml", redact_plan_yaml(plan_yaml))

    trouble.attempt("plan.yaml", write)


INTERVALS_FILE = "intervals.csv"
HLOG_FILE = "latency.hlog"
EVENTS_FILE = "events.jsonl"
HOSTS_FILE = "hosts.csv"
COUNTERS_FILE = "host_counters.csv"
CONTROLLER_FILE = "controller.csv"
STEPS_FILE = "steps.csv"
SUMMARY_FILE = "summary.json"
_HLOG_HEADER = (
    "#[Histogram log of a loadfleet run: latency in microseconds, one interval per line]\n"
    "#[BaseTime: 0.000 (seconds since epoch)]\n"
    '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n'
)


@dataclass(frozen=True)
class Offsets:
    """How far intervals.csv and latency.hlog are written (bytes): what a recovery keeps."""

    intervals: int = 0
    hlog: int = 0


class RunDirWriter:
    """Appends the run's stream to its directory (see the module's docstring). Holds a
    few open files and the steps' results: O(steps). A file that cannot be written is
    told to `trouble` and left as far as it was complete."""

    def __init__(
        self,
        run_dir: Path,
        target_urls: list[str],
        *,
        resume: Offsets | None = None,
        trouble: DiskTrouble | None = None,
        disk: DiskWriter | None = None,
        scenarios: bool = False,
    ):
        """`disk` writes the files (the run's, shared with its journal: diskwriter.py);
        `scenarios`: the plan has scenarios (intervals.csv's `scenario` column)."""
        self.run_dir = run_dir
        self._target_urls = target_urls
        self._scenarios = scenarios
        self.trouble = trouble = trouble or DiskTrouble(run_dir)
        self._disk = disk = disk or DiskWriter()
        trouble.attempt(".", lambda: run_dir.mkdir(parents=True, exist_ok=True))
        self._intervals = AppendFile(
            run_dir / INTERVALS_FILE,
            trouble,
            header=_csv_line(interval_columns(scenarios)),
            keep_bytes=resume.intervals if resume else None,
            disk=disk,
        )
        self._hlog = AppendFile(
            run_dir / HLOG_FILE, trouble, header=_HLOG_HEADER, keep_bytes=resume.hlog if resume else None, disk=disk
        )
        events = run_dir / EVENTS_FILE
        self._events = AppendFile(
            events, trouble, keep_bytes=events.stat().st_size if events.exists() else None, disk=disk
        )
        self._hosts: AppendFile | None = None
        self._counters: AppendFile | None = None
        self._controller: AppendFile | None = None
        self._checks: AppendFile | None = None
        self.results: list[StepResult] = []

    @property
    def offsets(self) -> Offsets:
        return Offsets(self._intervals.tell(), self._hlog.tell())

    def on_interval(self, interval: FinalInterval) -> None:
        start = interval.start_ms
        scenario_rows = interval.scenario_totals
        written = [(Scope.CLUSTER, "", row) for row in (*interval.cluster, *scenario_rows, interval.total)]
        for agent in interval.agents:
            detail = agent.rows if interval.step.agent_detail else ()
            by_scenario = agent.scenario_totals if self._scenarios else ()  # a plain run's: none, not looked for
            written += [(Scope.AGENT, agent.agent_id, row) for row in (*detail, *by_scenario, agent.total)]
        interval.compute_figures([row for _, _, row in written])
        verdict = interval.verdict
        judged = {"": verdict, **verdict.by_agent()}  # by agent id; the cluster's under ""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for scope, agent_id, row in written:
            own = judged.get(agent_id, VALID)
            writer.writerow(
                safe_row(
                    [
                        *interval_cells(start, scope, agent_id, row, interval.figures(row), scenarios=self._scenarios),
                        own.validity.value,
                        own.reasons_text(),
                    ]
                )
            )
        self._intervals.write(out.getvalue())
        if checks := check_csv_rows(start, interval.cluster, scenarios=self._scenarios):
            if self._checks is None:
                self._checks = self._samples_file(CHECKS_FILE, checks_columns(self._scenarios))
            self._checks.write("".join(_csv_line(r) for r in checks))
        lines = [_hlog_line("cluster", start, interval.interval_ms, interval.total)]
        lines += [_hlog_line(f"scenario:{r.scenario}", start, interval.interval_ms, r) for r in scenario_rows]
        if interval.step.agent_detail:
            lines += [_hlog_line(f"agent:{a.agent_id}", start, interval.interval_ms, a.total) for a in interval.agents]
        self._hlog.write("".join(filter(None, lines)))
        self.flush()

    def on_step_end(self, end: StepEnd) -> None:
        self.results.append(end.result)
        self.trouble.attempt(
            STEPS_FILE,
            lambda: write_atomic(
                self.run_dir / STEPS_FILE, steps_csv(self.results, self._target_urls, scenarios=self._scenarios)
            ),
        )

    def on_run_end(self) -> None:
        self.close()

    def on_event(self, event: Event) -> None:
        self._events.write(json.dumps(event.to_doc()) + "\n")
        self._events.flush()

    def on_host(self, step: StepWindow, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        if self._hosts is None:
            self._hosts = self._samples_file(HOSTS_FILE, HOSTS_CSV_HEADER)
        self._hosts.write("".join(_csv_line(r) for r in host_csv_rows(host, monitor, sample)))
        if sample.counters:
            if self._counters is None:
                self._counters = self._samples_file(COUNTERS_FILE, COUNTERS_CSV_HEADER)
            self._counters.write("".join(_csv_line(r) for r in counter_csv_rows(host, sample)))

    def on_controller(self, sample: ControllerSample) -> None:
        if self._controller is None:
            self._controller = self._samples_file(CONTROLLER_FILE, CONTROLLER_CSV_HEADER)
        self._controller.write(_csv_line(sample.csv_row()))

    def _samples_file(self, name: str, header: list[str]) -> AppendFile:
        """A file of samples, opened when the first comes: a run taken over after a crash
        appends to what the crashed controller wrote."""
        path = self.run_dir / name
        if path.exists():
            return AppendFile(path, self.trouble, keep_bytes=path.stat().st_size, disk=self._disk)
        return AppendFile(path, self.trouble, header=_csv_line(header), disk=self._disk)

    def flush(self) -> None:
        """Hands what is written to the OS: it survives the process dying (not the host)."""
        for f in self._files():
            f.flush()

    def sync(self) -> None:
        """Flushes, and makes what is written survive the host crashing too (in the disk's thread)."""
        for f in self._files():
            f.sync()

    def close(self) -> None:
        """Safe to call twice."""
        for f in self._files():
            f.close()

    def _files(self) -> list[AppendFile]:
        files = (self._intervals, self._hlog, self._events, self._hosts, self._counters, self._controller, self._checks)
        return [f for f in files if f is not None]


def _csv_line(values: Iterable[object]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(safe_row(values))
    return out.getvalue()


def _hlog_line(tag: str, start: int, interval_ms: int, row: StatsRow) -> str:
    if not row.histogram:
        return ""
    payload = base64.b64encode(row.histogram.encode()).decode()
    return f"Tag={tag},{start / 1000:.3f},{interval_ms / 1000:.3f},{row.histogram.max_value / 1000:.3f},{payload}\n"


def write_summary(
    run_dir: Path, summary: RunSummary, trouble: DiskTrouble | None = None, *, report: bool = True
) -> bool:
    """summary.json, then (`report`) report.html built from the run directory; False when
    either could not be written (a full disk: told to `trouble`)."""
    trouble = trouble or DiskTrouble(run_dir)
    text = json.dumps(summary.to_json(), indent=2) + "\n"
    if not trouble.attempt(SUMMARY_FILE, lambda: write_atomic(run_dir / SUMMARY_FILE, text)):
        return False
    return report_written(run_dir, try_report(run_dir), trouble) if report else True


def try_report(run_dir: Path) -> Exception | None:
    """Builds report.html from the run directory; what went wrong, or None. Touches nothing
    but the run's files, so a controller runs it in a thread (a long run's report takes
    seconds of reading while other runs' agents need their leases renewed)."""
    try:
        write_report(run_dir)
    except (LoadfleetError, OSError, ValueError) as exc:
        return exc
    return None


def report_written(run_dir: Path, problem: Exception | None, trouble: DiskTrouble) -> bool:
    """Whether report.html was written; a full disk is told to `trouble`, another problem
    logged (the run's results stand without their report)."""
    if problem is None:
        return True
    cause = problem if isinstance(problem, OSError) else problem.__cause__
    if isinstance(cause, OSError):  # the disk would not take it
        trouble.failed(REPORT_FILE, cause)
        return False
    log.warning("%s not written: %s", run_dir / REPORT_FILE, problem)
    return True
