"""A target that only refuses connections: every output says 0 ok/s beside the attempts, and
no latency (null, an empty cell, no field, `-`, "no response"), never a latency of 0."""

from __future__ import annotations

import csv
import json

import pytest

from loadfleet.controller.analysis.summary import summarize
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.model.figures import figures_of
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.output import rundir
from loadfleet.controller.output.console import PROGRESS_HEADER, progress_line, summary_table
from loadfleet.controller.output.report.figuresrow import NO_RESPONSE
from loadfleet.controller.output.report.html import summary_table as report_table
from loadfleet.controller.output.sinks.points import http_points
from loadfleet.controller.output.sinks.steppoints import step_point
from loadfleet.controller.output.watchers import IntervalUpdate
from loadfleet.controller.rpc.runconvert import interval_to_proto, summary_to_proto
from loadfleet.controller.stream.contract import Scope
from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow
from support.streamdata import interval, row, window

REFUSED = "http://127.0.0.2:18081"
START_MS = 1_800_000_000_000


def refused_row(n: int = 40) -> StatsRow:
    return StatsRow(REFUSED, "r", requests=n, errors={stats_pb2.ERROR_KIND_CONNECT_REFUSED: n})


def test_the_figures_of_only_refused_connects_are_attempts_no_success_and_no_latency():
    f = figures_of(refused_row(40), 2.0)
    assert (f.rps, f.ok_rps, f.error_pct) == (20.0, 0.0, 100.0)
    assert f.latency is None and f.phases is None
    answered = figures_of(row(10, latencies=[1000] * 10), 2.0)
    assert answered.ok_rps == 5.0 and answered.latency is not None and answered.latency.p50_ms > 0


@pytest.fixture
def refused_run(tmp_path):
    """A run directory, written by the controller's own writer, of one target that refuses
    everything and one that answers (2 intervals)."""
    run_dir = tmp_path / "runs" / "20300101-000000-dead"
    writer, totals = rundir.RunDirWriter(run_dir, [REFUSED, "http://t:1"]), RunTotals()
    step = window(start_ms=START_MS, seconds=2)
    for i in range(2):
        # The first interval only refused; the second has answers from the other target too.
        rows = [refused_row()] + ([row(10, latencies=[2000] * 10)] if i else [])
        published = interval(step, START_MS + 1000 * i, a1=rows)
        writer.on_interval(published)
        totals.on_interval(published)
    writer.close()
    summary = summarize(
        run_id=run_dir.name,
        plan_name="dead",
        state="finished",
        message="",
        run_dir=str(run_dir),
        started_ms=START_MS,
        totals=totals,
        agent_ids=["a1"],
        events=[],
    )
    rundir.write_summary(run_dir, summary)
    return run_dir, summary


def test_summary_json_writes_null_latency_and_0_ok_rps(refused_run):
    run_dir, _ = refused_run
    doc = json.loads((run_dir / "summary.json").read_text())
    [dead] = [t for t in doc["targets"] if t["name"] == REFUSED]
    assert dead["figures"]["latency"] is None and dead["figures"]["ok_rps"] == 0.0 and dead["figures"]["rps"] > 0
    assert doc["total"]["figures"]["latency"]["p50_ms"] > 0, "the other target's answers"
    [dead_entry] = [t for t in SummaryDoc.of(doc).targets if t.name == REFUSED]
    assert dead_entry.figures.latency is None and dead_entry.figures.ok_rps == 0.0


def test_intervals_csv_has_ok_rps_and_empty_latency_cells(refused_run):
    run_dir, _ = refused_run
    rows = list(csv.DictReader((run_dir / "intervals.csv").open()))
    first = [r for r in rows if r["interval_start_ms"] == str(START_MS) and r["scope"] == "cluster"]
    assert first and all(r["ok_rps"] == "0.0" and float(r["rps"]) == 40 for r in first)
    latency_columns = ("mean_ms", "stddev_ms", "min_ms", "p50_ms", "p99_ms", "p999_ms", "max_ms")
    assert all(r[c] == "" for r in first for c in latency_columns)
    answered = [r for r in rows if r["target"] == "http://t:1" and r["scope"] == "cluster"]
    assert answered[0]["ok_rps"] == "10.0" and float(answered[0]["p50_ms"]) > 0


def test_the_report_reads_empty_cells_as_gaps_and_says_no_response(refused_run):
    from loadfleet.controller.output.report.rundata import load_run

    run_dir, summary = refused_run
    run = load_run(run_dir)
    p50 = [y for _, y in run.latency_series("p50_ms")]
    assert p50[0] != p50[0] and p50[1] > 0, "a gap (NaN) where nothing answered, not 0"
    assert [y for _, y in run.total_series("ok_rps")] == [0.0, 10.0]
    html = report_table(summary.to_json())
    dead_row = html.split(f"<td>{REFUSED}</td>")[1].split("</tr>")[0]
    assert f"<td>{NO_RESPONSE}</td>" in dead_row and "<td>0.0</td>" in dead_row  # ok/s
    assert (run_dir / "report.html").is_file()


def test_influxdb_points_have_ok_rps_and_leave_latency_out():
    [point] = http_points(
        run_id="r",
        step="main",
        scope=Scope.CLUSTER,
        agent="",
        interval_start_ms=0,
        interval_ms=1000,
        rows=[refused_row(40)],
    )
    fields = dict(point.fields)
    assert (fields["rps"], fields["ok_rps"]) == (40.0, 0.0)
    assert not [k for k in fields if k.endswith("_ms") and k != "max_send_lag_ms"], "no latency of nothing"
    step = dict(
        step_point(
            run_id="r",
            step="main",
            servers=1,
            offered=1.0,
            start_ms=0,
            total=figures_of(refused_row(40), 2.0),
            bytes_per_s=0.0,
            generator_bound=False,
            losses=0,
        ).fields
    )
    assert step["ok_rps"] == 0.0 and "p99_ms" not in step and "mean_ms" not in step


def test_the_console_shows_ok_per_second_and_a_dash_for_the_latency_of_nothing(refused_run):
    update = IntervalUpdate(0, agents=1, missing=0, lost=0, figures=figures_of(refused_row(40), 1.0), users=2)
    message = interval_to_proto(update)
    assert (message.rps, message.ok_rps, message.latency_measured) == (40.0, 0.0, False)
    line = progress_line(message)
    header = PROGRESS_HEADER.split()
    assert header[2:4] == ["req/s", "ok/s"]
    assert line.split()[2:7] == ["40.0", "0.0", "0.00", "-", "-"]  # req/s, ok/s, MB/s, p50, p99
    _, summary = refused_run
    table = summary_table(summary_to_proto(summary), summary.to_json())
    dead = next(line for line in table.splitlines() if line.strip().startswith(REFUSED))
    assert dead.split()[1:4] == ["80", "40.0", "0.0"] and dead.split()[-5:] == ["-"] * 5
    total = next(line for line in table.splitlines() if line.startswith("total"))
    assert total.split()[2:4] == ["45.0", "5.0"] and "-" not in total.split()  # 90 attempts, 10 ok in 2 s
