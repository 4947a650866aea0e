"""What the controller does with Gatling's extras: agents' report archives stored in the run
directory (chunks, plain names, no path traversal), and rows counted without latency (a
simulation without loadfleet's hook) in sinks, the console summary and comparisons."""

from __future__ import annotations

import io
import zipfile

import pytest

from loadfleet.controller.model.figures import figures_of
from loadfleet.controller.output.artifacts import ArtifactBudget, discard_partials, store_artifact_chunk
from loadfleet.controller.output.console import LATENCY_NOT_MEASURED, summary_table
from loadfleet.controller.output.sinks.points import http_points
from loadfleet.controller.stream.contract import Scope
from loadfleet.v1 import run_pb2
from loadfleet.wire.stats import StatsRow, total_row
from support.handsession import zipped


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


@pytest.mark.parametrize(
    "name", ["", ".hidden.zip", "-r.zip", "a b.zip", "r\x1b[31m.zip", "r\u00e9.zip", "x" * 101, "r.zip\n"]
)
def test_an_artifact_name_must_be_short_and_plain(tmp_path, name):
    with pytest.raises(ValueError, match="is not a plain file name"):
        store_artifact_chunk(tmp_path, "a1", name, b"PK", last=False)
    assert not list(tmp_path.rglob("*"))


def test_an_agents_artifacts_stop_at_its_byte_budget_and_the_partial_file_goes(tmp_path):
    budget = ArtifactBudget(bytes_left=5000)
    store_artifact_chunk(tmp_path, "a1", "r.zip", b"PK" * 1500, last=False, budget=budget)
    with pytest.raises(ValueError, match="would take more than"):
        store_artifact_chunk(tmp_path, "a1", "r.zip", b"PK" * 1500, last=False, budget=budget)
    assert not list(tmp_path.rglob("*.part"))
    with pytest.raises(ValueError, match="would take more than"):  # spent, not given back
        store_artifact_chunk(tmp_path, "a1", "s.zip", b"PK" * 1500, last=False, budget=budget)


def test_an_agent_begins_a_bounded_number_of_artifacts(tmp_path):
    budget = ArtifactBudget(artifacts_left=2)
    for name in ("a.zip", "b.zip", "a.zip"):  # the third chunk goes on with a.zip: no new artifact
        store_artifact_chunk(tmp_path, "a1", name, b"PK", last=False, budget=budget)
    with pytest.raises(ValueError, match="began more than"):
        store_artifact_chunk(tmp_path, "a1", "c.zip", b"PK", last=False, budget=budget)
    assert sorted(p.name for p in tmp_path.rglob("*.part")) == [".a.zip.part", ".b.zip.part"]


@pytest.mark.parametrize(
    "budget, problem",
    [
        (ArtifactBudget(files_left=1), "holds 2 files"),
        (ArtifactBudget(bytes_left=60_000), "unpacks to 100000 bytes"),  # packed it fits
    ],
)
def test_what_a_zip_unpacks_to_is_charged_before_anything_is_written(tmp_path, budget, problem):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:  # a few hundred bytes packed
        archive.writestr("sim/index.html", b"x" * 50_000)
        archive.writestr("sim/app.js", b"y" * 50_000)
    data = out.getvalue()
    with pytest.raises(ValueError, match=problem):
        store_artifact_chunk(tmp_path, "a1", "r.zip", data, last=True, budget=budget)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_the_partial_files_of_a_closed_run_are_removed_and_reports_kept(tmp_path):
    store_artifact_chunk(tmp_path, "a1", "r.zip", zipped({"sim/index.html": b"ok"}), last=True)
    store_artifact_chunk(tmp_path, "a1", "never-ends.zip", b"PK" * 1000, last=False)
    store_artifact_chunk(tmp_path, "a2", "r.zip", b"PK" * 1000, last=False)
    discard_partials(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == [
        "gatling/a1/sim/index.html"
    ]


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
    assert figures.latency_missing and figures.latency is None  # counts only: no latency, not 0
    summary = run_pb2.RunSummary(run_id="r", total=run_pb2.Totals(name="*", requests=10))
    doc = {"total": {"figures": {"latency_missing": figures.latency_missing}}}
    assert summary_table(summary, doc).endswith(LATENCY_NOT_MEASURED)
    assert LATENCY_NOT_MEASURED not in summary_table(summary, {"total": {"figures": {"latency_missing": False}}})
