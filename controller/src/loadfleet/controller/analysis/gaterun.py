"""A run directory as the regression gate (gate.py) reads it: the run's measured intervals
that the generators did not invalidate, each one's counts and latency, in time order.

From `summary.json` the run's id, its state and its steps' measured windows (warm-up and a
sweep step's final interval left out, as in the run's own figures; a summary without steps
has every interval measured); from `intervals.csv` the cluster's `*`,`*` row of each
interval (its counts and its generator-health verdict, `validity`), or with a request named
its rows over the targets summed; from `latency.hlog` the cluster's histogram of each
interval; from `plan.yaml` the plan, flattened to compare two runs' plans key by key.

The latency of one request has no histogram in a run directory (latency.hlog holds the
cluster's only), so for a request only its mean (the rows' means weighed by their responses,
which is the merged histogram's mean) and its maximum are known, never its percentiles.

The file names and formats are output/rundir.py's (this room cannot import it). Anything
unreadable raises UsageError naming the file and, where it can, the line.
"""

from __future__ import annotations

import base64
import binascii
import csv
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from loadfleet.controller.model.csvcells import read_cell
from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.model.verdict import Validity
from loadfleet.wire.histogram import MEDIAN_VALUE, Histogram, HistogramError

SUMMARY_FILE = "summary.json"
INTERVALS_FILE = "intervals.csv"
HLOG_FILE = "latency.hlog"
PLAN_FILE = "plan.yaml"
TOTAL = "*"
_CLUSTER_TAG = "Tag=cluster,"
_STATUS_COLUMNS = tuple(f"status_{c}xx" for c in "12345")
_NEEDED = ("interval_start_ms", "scope", "target", "request", "requests", "ok", "failed", "rps", "mean_ms", "max_ms")


@dataclass(frozen=True)
class Intervals:
    """Per interval (one array element each, in time order): counts, rates, and latency as
    sums (so any set of intervals merges by adding); `counts` (n × K) the histogram's buckets
    `buckets` (K bucket indices: the union of the non-empty ones), None for a request's."""

    start_ms: np.ndarray
    requests: np.ndarray
    ok: np.ndarray
    failed: np.ndarray
    rps: np.ndarray
    ok_rps: np.ndarray
    responses: np.ndarray  # responses with a latency
    latency_sum_ms: np.ndarray  # their latencies summed (histogram bucket medians)
    max_ms: np.ndarray  # NaN: no response in the interval
    buckets: np.ndarray | None = None
    counts: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.start_ms)


@dataclass(frozen=True)
class GateRun:
    run_id: str
    run_dir: Path
    state: str
    measured: int  # measured intervals
    invalid: int  # of them, judged invalid (generator-bound)
    intervals: Intervals  # the measured intervals not invalid
    plan: dict[str, str] | None = field(default=None)  # plan.yaml flattened (plan_keys); None: no plan.yaml


@dataclass
class _Row:
    """One interval's sums while intervals.csv is read."""

    validity: str = ""
    values: dict[str, float] = field(default_factory=dict)

    def add(self, values: dict[str, float]) -> None:
        for name, value in values.items():
            held = self.values.get(name)
            if math.isnan(value):
                self.values.setdefault(name, value)
            elif held is None or math.isnan(held):
                self.values[name] = value
            else:
                self.values[name] = max(held, value) if name == "max_ms" else held + value


def read_gate_run(run_dir: Path, *, request: str | None = None, latency: bool = True) -> GateRun:
    """The run in `run_dir`; `request`: that request's figures, not the cluster's; `latency`:
    latency is gated, so a run directory without its latency.hlog is refused."""
    run_dir = Path(run_dir)
    doc = _read_summary(run_dir)
    if latency and request is None and not (run_dir / HLOG_FILE).is_file():
        raise UsageError(f"{run_dir}: no {HLOG_FILE}, the intervals' latency histograms: latency cannot be gated")
    summary = SummaryDoc.of(doc)
    rows = _read_intervals(run_dir / INTERVALS_FILE, request)
    windows = _measured_windows(doc)
    measured = {s: r for s, r in rows.items() if not windows or any(a <= s < b for a, b in windows)}
    usable = sorted(s for s, r in measured.items() if r.validity != Validity.INVALID.value)
    histograms = _read_hlog(run_dir / HLOG_FILE) if request is None else None
    return GateRun(
        run_id=str(summary.run_id if summary.run_id is not None else run_dir.name),
        run_dir=run_dir,
        state=str(summary.state or ""),
        measured=len(measured),
        invalid=len(measured) - len(usable),
        intervals=_intervals([(s, measured[s]) for s in usable], histograms),
        plan=_read_plan(run_dir / PLAN_FILE),
    )


def _read_summary(run_dir: Path) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    path = run_dir / SUMMARY_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{run_dir}: not a run directory with results (no {SUMMARY_FILE})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from exc
    if not isinstance(doc, dict) or "run_id" not in doc:
        raise UsageError(f"{path}: not a loadfleet run summary (no run_id)")
    return doc


def _measured_windows(doc: dict[str, Any]) -> list[tuple[float, float]]:
    """Each step's measured window [start, end) in ms (stepresult.StepResult: `start_ms` its
    first measured interval, `measured_s` long); none measured: []."""
    windows = []
    for step in doc.get("steps") or ():
        start, seconds = step.get("start_ms"), step.get("measured_s")
        if isinstance(start, (int, float)) and isinstance(seconds, (int, float)) and start > 0 and seconds > 0:
            windows.append((float(start), float(start) + 1000 * float(seconds)))
    return windows


def _read_intervals(path: Path, request: str | None) -> dict[int, _Row]:
    """Each interval's row by its start: the cluster's `*`,`*` row, or `request`'s rows summed
    (the validity always the `*`,`*` row's)."""
    rows: dict[int, _Row] = {}
    names: set[str] = set()
    for line_no, cells in _csv_rows(path):
        if cells["scope"] != "cluster":
            continue
        try:
            start, values = int(cells["interval_start_ms"]), _values(cells)
        except ValueError as exc:
            raise UsageError(f"{path}:{line_no}: {exc}") from exc
        row = rows.setdefault(start, _Row())
        if cells["target"] == TOTAL:
            row.validity = cells.get("validity", "")
            if request is None:
                row.values = values  # a later row of the same interval (a takeover's) replaces it
        elif request is not None and cells["request"] == request:
            row.add(values)
        names.add(cells["request"])
    if request is not None and request not in names:
        known = ", ".join(sorted(names - {TOTAL})) or "none"
        raise UsageError(f"{path}: no request named {request!r} (its requests: {known})")
    return rows


_NUMBERS = ("requests", "ok", "failed", "rps", "ok_rps", "max_ms")
_READ = frozenset((*_NEEDED, *_NUMBERS, *_STATUS_COLUMNS, "validity"))


def _values(cells: dict[str, str]) -> dict[str, float]:
    """A row's numbers (an empty cell: NaN, a figure of nothing), and its responses and their
    latencies summed (the mean times the responses), which add up over rows where means do not."""
    values = {k: float(cells[k]) if cells[k] else math.nan for k in _NUMBERS if k in cells}
    responses = sum(float(cells[c] or 0) for c in _STATUS_COLUMNS if c in cells)
    mean_ms = float(cells["mean_ms"]) if cells["mean_ms"] else 0.0
    return {**values, "responses": responses, "latency_sum_ms": mean_ms * responses}


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """intervals.csv's cluster rows as {column: cell} of the columns the gate reads, text cells
    unescaped; none when there is no file. Agents' rows are skipped unread (a long run's most)."""
    if not path.is_file():
        return
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, [])
            missing = [c for c in _NEEDED if c not in header]
            if missing:
                raise UsageError(f"{path}: not a loadfleet intervals file (no column {', '.join(missing)})")
            wanted = [(c, i) for i, c in enumerate(header) if c in _READ]
            scope = header.index("scope")
            for line_no, cells in enumerate(reader, start=2):
                if len(cells) != len(header):
                    raise UsageError(f"{path}:{line_no}: {len(cells)} columns, expected {len(header)}")
                if cells[scope] == "cluster":
                    yield line_no, {c: read_cell(cells[i]) for c, i in wanted}
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from exc


def _read_hlog(path: Path) -> dict[int, Histogram]:
    """The cluster's histogram of each interval by its start (ms); an interval without a
    response has no line. No file: none."""
    histograms: dict[int, Histogram] = {}
    if not path.is_file():
        return histograms
    try:
        with path.open(encoding="ascii") as f:
            for line_no, line in enumerate(f, start=1):
                if line.startswith(_CLUSTER_TAG):
                    start, histogram = _hlog_line(line[len(_CLUSTER_TAG) :], path, line_no)
                    histograms[start] = histogram
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from exc
    return histograms


def _hlog_line(line: str, path: Path, line_no: int) -> tuple[int, Histogram]:
    """`start_s,length_s,max,payload` (rundir.py's _hlog_line after its tag)."""
    parts = line.strip().split(",")
    try:
        if len(parts) != 4:
            raise ValueError(f"{len(parts) + 1} fields, expected 5")
        return round(float(parts[0]) * 1000), Histogram.decode(base64.b64decode(parts[3], validate=True)).check()
    except (ValueError, binascii.Error, HistogramError) as exc:
        raise UsageError(f"{path}:{line_no}: not a histogram log line: {exc}") from exc


def _intervals(rows: list[tuple[int, _Row]], histograms: dict[int, Histogram] | None) -> Intervals:
    def column(name: str) -> np.ndarray:
        return np.array([r.values.get(name, math.nan) for _, r in rows], dtype=np.float64)

    requests, ok = np.nan_to_num(column("requests")), np.nan_to_num(column("ok"))
    rps = np.nan_to_num(column("rps"))
    ok_rps = column("ok_rps")
    derived = np.divide(rps * ok, requests, out=np.zeros_like(rps), where=requests > 0)
    ok_rps = np.where(np.isnan(ok_rps), derived, ok_rps)  # runs from before the ok_rps column
    common = dict(
        start_ms=np.array([s for s, _ in rows], dtype=np.int64),
        requests=requests,
        ok=ok,
        failed=np.nan_to_num(column("failed")),
        rps=rps,
        ok_rps=ok_rps,
    )
    if histograms is None:  # a request's rows: latency from their means and maxima
        return Intervals(
            **common,
            responses=np.nan_to_num(column("responses")),
            latency_sum_ms=np.nan_to_num(column("latency_sum_ms")),
            max_ms=column("max_ms"),
        )
    return _with_histograms(common, [histograms.get(s) for s, _ in rows])


def _with_histograms(common: dict[str, np.ndarray], histograms: list[Histogram | None]) -> Intervals:
    """The intervals' histograms as an (n × K) matrix over the union of their non-empty buckets."""
    present = [h for h in histograms if h]
    buckets = np.unique(np.concatenate([h.indices for h in present])) if present else np.zeros(0, np.int64)
    counts = np.zeros((len(histograms), len(buckets)), dtype=np.float64)  # float64: exact to 2^53
    for i, h in enumerate(histograms):
        if h:
            counts[i, np.searchsorted(buckets, h.indices)] = h.counts
    top = np.array([h.max_value / 1000 if h else math.nan for h in histograms], dtype=np.float64)
    return Intervals(
        **common,
        responses=counts.sum(axis=1),
        latency_sum_ms=counts @ (MEDIAN_VALUE[buckets] / 1000),
        max_ms=top,
        buckets=buckets,
        counts=counts,
    )


def _read_plan(path: Path) -> dict[str, str] | None:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from exc
    return plan_keys(doc)


def plan_keys(doc: Any) -> dict[str, str]:
    """The plan as {path: value as JSON}, e.g. {"load.clients": "4", "targets[0].weight": "1"},
    without what may differ between two runs of the same plan: its `name` and the targets'
    `url` (a lab's ports change from one start to the next)."""
    flat: dict[str, str] = {}
    _flatten(doc, "", flat)
    return {k: v for k, v in flat.items() if k != "name" and not (k.startswith("targets[") and k.endswith("].url"))}


def _flatten(value: Any, path: str, into: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(inner, f"{path}.{key}" if path else str(key), into)
    elif isinstance(value, list) and value:
        for i, inner in enumerate(value):
            _flatten(inner, f"{path}[{i}]", into)
    else:
        into[path] = json.dumps(value, sort_keys=True, default=str)


def plan_differences(base: dict[str, str], candidate: dict[str, str]) -> list[str]:
    """The keys whose values differ, or that one plan has and the other has not."""
    return sorted(k for k in base.keys() | candidate.keys() if base.get(k) != candidate.get(k))
