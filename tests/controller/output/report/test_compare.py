import json
import re
import xml.etree.ElementTree as ET

import pytest

from loadfleet.controller.output.report import load_run, write_compare
from loadfleet.controller.output.report.compare import METRICS, change, compare_rows, compare_text, render_compare

from .conftest import START_MS, write_synthetic_run

NS = {"s": "http://www.w3.org/2000/svg"}


@pytest.fixture
def two_runs(tmp_path):
    first = write_synthetic_run(tmp_path / "runs" / "20300101-000000-aaaa")
    second = write_synthetic_run(tmp_path / "runs" / "20300101-000100-bbbb", start_ms=START_MS + 3_600_000)
    # The second run: same shape, twice the requests.
    summary = json.loads((second / "summary.json").read_text())
    summary["total"]["figures"]["requests"] *= 2
    summary["total"]["figures"]["rps"] *= 2
    (second / "summary.json").write_text(json.dumps(summary))
    return [load_run(first), load_run(second)]


@pytest.mark.parametrize(
    "base, value, text",
    [
        (100, 110, "+10.0%"),
        (100, 50, "-50.0%"),
        (3, 3, "+0.0%"),
        (0, 5, ""),
        (0.0, 0.0, ""),
    ],
)
def test_change_against_the_baseline(base, value, text):
    assert change(base, value) == text


def test_rows_carry_every_metric_of_each_run(two_runs):
    rows = compare_rows(two_runs)
    assert [r["run_id"] for r in rows] == ["20300101-000000-aaaa", "20300101-000100-bbbb"]
    total = two_runs[0].summary["total"]["figures"]
    assert rows[0]["requests"] == total["requests"]
    assert rows[0]["p99_ms"] == total["latency"]["p99_ms"]
    assert rows[1]["requests"] == 2 * total["requests"]
    assert {key for key, _, _ in METRICS} <= set(rows[0])


def test_the_text_table_puts_runs_side_by_side_with_changes(two_runs):
    text = compare_text(two_runs)
    header, *lines = text.splitlines()
    assert header.split() == ["20300101-000000-aaaa", "20300101-000100-bbbb"]
    requests = next(line for line in lines if line.startswith("requests"))
    assert requests.endswith("(+100.0%)")
    assert len({len(line) for line in [header, *lines[:-1]]}) == 1  # aligned columns


def test_the_html_overlays_one_curve_per_run(two_runs, tmp_path):
    out = write_compare([*two_runs, two_runs[0]], tmp_path / "compare.html")
    html = out.read_text()
    svgs = [ET.fromstring(s) for s in re.findall(r'<svg class="chart".*?</svg>', html, re.S)]
    assert [svg.find("s:title", NS).text for svg in svgs] == ["Requests/s (cluster)", "p99 latency (cluster)"]
    names = ["20300101-000000-aaaa", "20300101-000100-bbbb", "20300101-000000-aaaa #2"]
    for svg in svgs:
        assert [g.get("data-name") for g in svg.iterfind(".//s:g[@class='series']", NS)] == names
        assert len(svg.findall(".//s:polyline", NS)) == 3
    assert "(+100.0%)" in html
    assert "src=" not in html and "<link" not in html, "one file, nothing fetched"
    datas = [
        json.loads(d) for d in re.findall(r'<script type="application/json" class="chart-data">(.*?)</script>', html)
    ]
    assert [[s["name"] for s in d["series"]] for d in datas] == [names, names]


def test_runs_an_hour_apart_are_aligned_at_their_start(two_runs):
    assert [r.started_ms for r in two_runs] == [START_MS, START_MS + 3_600_000]
    assert [r.total_series("rps")[0][0] for r in two_runs] == [0.0, 0.0]
    svg = ET.fromstring(re.search(r'<svg class="chart".*?</svg>', render_compare(two_runs), re.S).group(0))
    firsts = [p.get("points").split()[0] for p in svg.iterfind(".//s:polyline", NS)]
    lasts = [p.get("points").split()[-1].split(",")[0] for p in svg.iterfind(".//s:polyline", NS)]
    assert firsts[0].split(",")[0] == firsts[1].split(",")[0] and lasts[0] == lasts[1]


def gatling_after_warm_up(run_dir, warmup_s: float):
    """The synthetic run as a Gatling run with a warm-up: its plan.yaml and its step `main`."""
    (run_dir / "plan.yaml").write_text(f"# the controller's copy\nname: x\ndriver: gatling\nwarmup_s: {warmup_s}\n")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["steps"] = [
        {
            "name": "main",
            "requests": 900,
            "achieved_rps": 225.0,
            "bytes_per_s": 2_000_000.0,
            "error_pct": 0.5,
            "mean_ms": 4.0,
            "stddev_ms": 1.0,
            "p50_ms": 3.5,
            "p99_ms": 9.0,
        }
    ]
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return load_run(run_dir)


def test_the_table_names_each_runs_driver_and_measures_a_warmed_up_run_after_its_warm_up(two_runs):
    (two_runs[0].run_dir / "plan.yaml").write_text("name: x\nduration_s: 6\n")  # no driver: the engine
    engine = load_run(two_runs[0].run_dir)
    gatling = gatling_after_warm_up(two_runs[1].run_dir, 2)
    rows = compare_rows([engine, gatling])
    assert [(r["driver"], r["measured"]) for r in rows] == [("engine", "whole run"), ("gatling", "after a 2 s warm-up")]
    assert (rows[0]["requests"], rows[0]["p99_ms"]) == (
        engine.summary["total"]["figures"]["requests"],
        engine.summary["total"]["figures"]["latency"]["p99_ms"],
    )
    assert {k: rows[1][k] for k in ("requests", "rps", "mb_per_s", "error_pct", "p99_ms")} == {
        "requests": 900,
        "rps": 225.0,
        "mb_per_s": 2.0,
        "error_pct": 0.5,
        "p99_ms": 9.0,
    }
    lines = {line.split()[0]: line.split()[1:] for line in compare_text([engine, gatling]).splitlines()}
    assert lines["driver"] == ["engine", "gatling"]
    assert lines["measured"] == ["whole", "run", "after", "a", "2", "s", "warm-up"]


def test_a_run_directory_without_a_plan_has_an_unknown_driver_and_no_measured_row(two_runs):
    rows = compare_rows(two_runs)  # the synthetic runs have no plan.yaml
    assert [r["driver"] for r in rows] == ["?", "?"]
    assert not [line for line in compare_text(two_runs).splitlines() if line.startswith("measured")]


def _with_phases(run, waiting_ms: float):
    """The run's summary as if its driver had measured phases: 0.2 ms connecting per response,
    `waiting_ms` waiting, 0.1 ms receiving."""
    from loadfleet.controller.model.codec import to_doc
    from loadfleet.controller.model.figures import PhaseFigures, PhaseTime

    phases = PhaseFigures(
        responses=1000,
        connect=PhaseTime(count=100, mean_ms=2.0, max_ms=3.0, per_response_ms=0.2),
        tls=PhaseTime(),
        waiting=PhaseTime(count=1000, mean_ms=waiting_ms, max_ms=9.0, per_response_ms=waiting_ms),
        receiving=PhaseTime(count=1000, mean_ms=0.1, max_ms=1.0, per_response_ms=0.1),
        other_ms=0.05,
        waiting_p99_ms=2 * waiting_ms,
    )
    run.summary["total"]["figures"]["phases"] = to_doc(phases)
    vars(run).pop("summary_doc", None)  # the typed reading of the summary is kept: read it again
    return run


def test_phases_are_compared_where_runs_measured_them(two_runs):
    first, second = two_runs
    assert "waiting ms/response" not in compare_text(two_runs)  # neither run measured phases
    assert compare_rows(two_runs)[0]["waiting_ms"] is None

    _with_phases(second, waiting_ms=1.5)
    lines = {line.split("  ")[0]: line for line in compare_text(two_runs).splitlines()}
    assert lines["waiting ms/response"].split()[-2:] == ["-", "1.500"]  # no baseline: no change
    assert lines["time to first byte p99 ms"].split()[-1] == "3.000"

    _with_phases(first, waiting_ms=1.0)
    rows = compare_rows(two_runs)
    assert (rows[0]["connect_ms"], rows[0]["waiting_ms"], rows[1]["waiting_ms"]) == (0.2, 1.0, 1.5)
    lines = {line.split("  ")[0]: line for line in compare_text(two_runs).splitlines()}
    assert lines["waiting ms/response"].endswith("1.500 (+50.0%)")
    assert lines["TLS ms/response"].split()[-2:] == ["0.000", "0.000"]  # no change of nothing
