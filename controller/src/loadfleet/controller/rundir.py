"""The run directory `runs/<run-id>/`: plan.yaml, summary.json, intervals.csv,
latency.hlog, and report.html built from them (report/).

intervals.csv has one row per interval per scope: `cluster` rows merge all agents,
`agent` rows are one agent's; within a scope there is a row per (target, request) and
a `*`,`*` row for the whole interval. latency.hlog holds the same intervals' latency
histograms (microseconds) in the standard HdrHistogram log format, tagged `cluster` or
`agent:<id>`, so that any percentile can be recomputed or merged later. Files are written to a temporary name and
renamed, so a reader never sees half a file. `gatling/<agent>/` holds each agent's Gatling HTML
report when the plan asks for it (`store_artifact_chunk`).
"""
from __future__ import annotations

import base64
import csv
import io
import json
import logging
import os
import zipfile
from pathlib import Path

from loadfleet.wire.stats import ERROR_KINDS, StatsRow, encode_histogram, error_kind_name, merge_rows

from .aggregate import TOTAL, RunAggregator
from .errors import LoadfleetError
from .figures import PERCENTILES, figures_of
from .redact import redact_plan_yaml
from .report import REPORT_FILE, write_report
from .report.rundata import GATLING_DIR
from .summary import RunSummary

log = logging.getLogger(__name__)

INTERVAL_COLUMNS = (
    ["interval_start_ms", "scope", "agent", "target", "request", "requests", "ok", "failed",
     "status_1xx", "status_2xx", "status_3xx", "status_4xx", "status_5xx"]
    + [f"err_{error_kind_name(k)}" for k in ERROR_KINDS]
    + ["bytes_in", "bytes_out", "conns_opened", "conns_closed", "active_conns", "rps", "mb_per_s",
       "mean_ms", "stddev_ms", "min_ms"]
    + [f"{name}_ms" for name, _ in PERCENTILES]
    + ["max_ms", "scheduled", "sent_late", "max_send_lag_ms", "not_sent"]
)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_plan(run_dir: Path, plan_yaml: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / "plan.yaml", redact_plan_yaml(plan_yaml))


# An agent's artifact larger than this, packed or unpacked, is refused (a report is a few MB).
MAX_ARTIFACT_BYTES = 512 * 2**20


def store_artifact_chunk(run_dir: Path, agent_id: str, name: str, data: bytes, *, last: bool) -> Path | None:
    """Appends one chunk of an agent's file (agent.proto's Artifact); after the last one, a
    zip is unpacked into GATLING_DIR/<agent_id>/ and the directory returned. Names from agents
    must be plain names and members must stay inside that directory (no path traversal).
    Raises ValueError when they do not, or the file is not a zip or too large."""
    for what, value in (("agent id", agent_id), ("artifact name", name)):
        if not value or value.startswith(".") or "/" in value or "\\" in value:
            raise ValueError(f"{what} {value!r} is not a plain file name")
    dest = run_dir / GATLING_DIR / agent_id
    dest.mkdir(parents=True, exist_ok=True)
    part = dest / f".{name}.part"
    if part.exists() and part.stat().st_size + len(data) > MAX_ARTIFACT_BYTES:
        part.unlink()
        raise ValueError(f"{name} from {agent_id} is larger than {MAX_ARTIFACT_BYTES} bytes")
    with part.open("ab") as f:
        f.write(data)
    if not last:
        return None
    try:
        _unzip_inside(part, dest)
    finally:
        part.unlink(missing_ok=True)
    return dest


def _unzip_inside(archive: Path, dest: Path) -> None:
    root = dest.resolve()
    try:
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            if sum(m.file_size for m in members) > MAX_ARTIFACT_BYTES:
                raise ValueError(f"{archive.name} unpacks to more than {MAX_ARTIFACT_BYTES} bytes")
            targets = [(m, (root / m.filename).resolve()) for m in members]
            outside = [m.filename for m, target in targets if not target.is_relative_to(root)]
            if outside:  # checked before anything is written
                raise ValueError(f"{archive.name}: {outside[0]!r} points outside {dest}")
            for member, target in targets:
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(member) as src, target.open("wb") as out:
                    out.write(src.read())
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{archive.name} is not a zip file: {exc}") from exc


def write_results(run_dir: Path, summary: RunSummary, aggregator: RunAggregator, interval_ms: int) -> None:
    write_atomic(run_dir / "summary.json", json.dumps(summary.to_json(), indent=2) + "\n")
    write_atomic(run_dir / "intervals.csv", intervals_csv(aggregator, interval_ms))
    write_atomic(run_dir / "latency.hlog", latency_log(aggregator, interval_ms))
    try:  # built from the files above; the run's results stand even when the report fails
        write_report(run_dir)
    except (LoadfleetError, OSError, ValueError) as exc:
        log.warning("%s not written: %s", run_dir / REPORT_FILE, exc)


def intervals_csv(aggregator: RunAggregator, interval_ms: int) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(INTERVAL_COLUMNS)
    seconds = interval_ms / 1000
    for start in aggregator.intervals():
        for scope, agent, rows in _scopes(aggregator, start):
            merged = merge_rows(rows)
            total = merge_rows(rows, target=TOTAL, request=TOTAL).get((TOTAL, TOTAL), StatsRow(TOTAL, TOTAL))
            for row in [*(merged[k] for k in sorted(merged)), total]:
                writer.writerow(_csv_row(start, scope, agent, row, seconds))
    return out.getvalue()


def latency_log(aggregator: RunAggregator, interval_ms: int) -> str:
    lines = ["#[Histogram log of a loadfleet run: latency in microseconds, one interval per line]",
             "#[BaseTime: 0.000 (seconds since epoch)]",
             '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"']
    for start in aggregator.intervals():
        for scope, agent, rows in _scopes(aggregator, start):
            total = merge_rows(rows, target=TOTAL, request=TOTAL).get((TOTAL, TOTAL))
            if total is None or total.histogram.get_total_count() == 0:
                continue
            tag = "cluster" if scope == "cluster" else f"agent:{agent}"
            payload = base64.b64encode(encode_histogram(total.histogram)).decode()
            lines.append(f"Tag={tag},{start / 1000:.3f},{interval_ms / 1000:.3f},"
                         f"{total.histogram.get_max_value() / 1000:.3f},{payload}")
    return "\n".join(lines) + "\n"


def _scopes(aggregator: RunAggregator, start: int):
    """(scope, agent, rows) of one interval: the cluster, then each agent."""
    return [("cluster", "", aggregator.rows_in(start)),
            *(("agent", agent, aggregator.agent_rows(start, agent)) for agent in aggregator.agents_in(start))]


def _csv_row(start: int, scope: str, agent: str, row: StatsRow, seconds: float) -> list:
    f = figures_of(row, seconds)
    lat = f.latency
    return [
        start, scope, agent, row.target, row.request, row.requests, row.ok, row.failed, *row.status,
        *(row.errors.get(k, 0) for k in ERROR_KINDS),
        row.bytes_in, row.bytes_out, row.connections_opened, row.connections_closed,
        row.active_connections, round(f.rps, 3), round(f.mb_per_s, 6),
        round(lat.mean_ms, 3), round(lat.stddev_ms, 3), round(lat.min_ms, 3),
        *(round(getattr(lat, f"{name}_ms"), 3) for name, _ in PERCENTILES),
        round(lat.max_ms, 3),
        row.scheduled, row.sent_late, round(row.max_send_lag_us / 1000, 3), row.not_sent,
    ]
