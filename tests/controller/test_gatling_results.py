"""What the controller does with Gatling's extras: agents' report archives stored in the run
directory (chunks, plain names, no path traversal), and rows counted without latency (a
simulation without loadfleet's hook) in sinks, the console summary and comparisons."""

from __future__ import annotations

import io
import zipfile

import pytest

from loadfleet.controller.console import LATENCY_NOT_MEASURED, summary_table
from loadfleet.controller.figures import figures_of
from loadfleet.controller.rundir import store_artifact_chunk
from loadfleet.controller.sinks.points import http_points
from loadfleet.controller.stream import Scope
from loadfleet.v1 import run_pb2
from loadfleet.wire.stats import StatsRow, total_row


def zipped(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_a_report_in_chunks_is_unpacked_under_the_agents_id(tmp_path):
    data = zipped({"sim-1/index.html": b"<html>report</html>", "sim-1/js/app.js": b"x" * 5000})
    chunks = [data[i : i + 1000] for i in range(0, len(data), 1000)]
    for chunk in chunks[:-1]:
        assert store_artifact_chunk(tmp_path, "a1", "gatling-report.zip", chunk, last=False) is None
    dest = store_artifact_chunk(tmp_path, "a1", "gatling-report.zip", chunks[-1], last=True)
    assert dest == tmp_path / "gatling" / "a1"
    assert (dest / "sim-1" / "index.html").read_bytes() == b"<html>report</html>"
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["app.js", "index.html"], "no part file left"


@pytest.mark.parametrize(
    "agent_id, name, files, problem",
    [
        ("a1", "r.zip", {"../../escape.html": b"x"}, "points outside"),
        ("a1", "r.zip", {"/etc/absolute.html": b"x"}, "points outside"),
        ("../a1", "r.zip", {"index.html": b"x"}, "agent id '../a1' is not a plain file name"),
        ("a1", "../r.zip", {"index.html": b"x"}, "artifact name '../r.zip' is not a plain file name"),
        ("", "r.zip", {"index.html": b"x"}, "agent id '' is not a plain file name"),
    ],
)
def test_names_that_would_leave_the_directory_are_refused_before_anything_is_written(
    tmp_path, agent_id, name, files, problem
):
    run_dir = tmp_path / "run"
    files = {"ok.html": b"fine", **files}
    with pytest.raises(ValueError, match=problem):
        store_artifact_chunk(run_dir, agent_id, name, zipped(files), last=True)
    assert not (tmp_path / "escape.html").exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "nothing written, not even ok.html"


def test_a_file_that_is_not_a_zip_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a zip file"):
        store_artifact_chunk(tmp_path, "a1", "r.zip", b"not a zip", last=True)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def counted_only() -> StatsRow:
    row = StatsRow("http://t:1", "index", requests=10, latency_missing=True)
    row.status[1] = 8
    return row


def test_rows_without_latency_reach_sinks_as_counts_without_latency_fields():
    (point, total) = http_points(
        run_id="r",
        step="main",
        scope=Scope.CLUSTER,
        agent="",
        interval_start_ms=0,
        interval_ms=1000,
        rows=[counted_only(), total_row([counted_only()])],
    )
    fields = dict(point.fields)
    assert (fields["requests"], fields["ok"], fields["errors"]) == (10, 8, 2)
    assert not [k for k in fields if k.endswith("_ms")], "no latency from an empty histogram"
    assert dict(total.fields)["requests"] == 10


def test_the_console_summary_says_latency_was_not_measured():
    figures = figures_of(counted_only(), 1.0)
    assert figures.latency_missing and figures.latency.p99_ms == 0
    summary = run_pb2.RunSummary(run_id="r", total=run_pb2.Totals(name="*", requests=10))
    doc = {"total": {"figures": {"latency_missing": figures.latency_missing}}}
    assert summary_table(summary, doc).endswith(LATENCY_NOT_MEASURED)
    assert LATENCY_NOT_MEASURED not in summary_table(summary, {"total": {"figures": {"latency_missing": False}}})
