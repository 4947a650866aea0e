"""The data each chart carries for uPlot (interactive.py), and the page without the library."""

import json
import re
from pathlib import Path

from loadfleet.controller.output.report import interactive, load_run
from loadfleet.controller.output.report.html import MAX_LINES, render_report
from loadfleet.controller.output.report.intervalsread import IntervalRow
from loadfleet.controller.output.report.rundata import RunData
from loadfleet.controller.output.report.svg import Chart, Marker, Series

DATA = re.compile(r'<script type="application/json" class="chart-data">(.*?)</script>', re.S)


def test_series_share_one_x_axis_with_gaps_where_a_series_has_no_finite_value():
    chart = Chart(
        "t",
        "req/s",
        (Series("a", ((0.0, 1.0), (1.0, float("nan")), (2.0, 3.0))), Series("b", ((1.0, 5.0), (3.0, 1 / 3)))),
        markers=(Marker(1.5, "agent_lost: b"),),
    )
    data = interactive.chart_data(chart)
    assert data["data"] == [[0.0, 1.0, 2.0, 3.0], [1.0, None, 3.0, None], [None, 5.0, None, 0.333333]]
    assert [s["name"] for s in data["series"]] == ["a", "b"]
    assert data["series"][0]["color"] != data["series"][1]["color"]
    assert data["markers"] == [{"x": 1.5, "label": "agent_lost: b"}]
    assert data["sync"] == interactive.TIME_SYNC_KEY and data["log_y"] is False


def test_a_logarithmic_axis_leaves_out_what_it_cannot_draw_and_offered_load_is_not_time():
    chart = Chart("p99", "ms", (Series("p99", ((100.0, 0.0), (200.0, 2.5))),), x_label="offered load", log_y=True)
    data = interactive.chart_data(chart)
    assert data["data"] == [[100.0, 200.0], [None, 2.5]] and data["log_y"] is True
    assert data["sync"] == ""


def test_names_cannot_end_the_script_that_holds_the_data():
    hostile = "</script><script>alert(1)</script>"
    html = interactive.figure(Chart("t", "x", (Series(hostile, ((0.0, 1.0),)),)))
    [payload] = DATA.findall(html)
    assert "<" not in payload
    assert json.loads(payload)["series"][0]["name"] == hostile


def fleet_run(n_agents: int) -> RunData:
    rows = tuple(
        IntervalRow(1000 + 1000 * t, "agent", f"agent-{a:04}", "*", "*", {"rps": float(a + t)})
        for a in range(n_agents)
        for t in range(3)
    )
    total = tuple(
        IntervalRow(1000 + 1000 * t, "cluster", "", "*", "*", {"rps": 1.0, "status_2xx": 1.0}) for t in range(3)
    )
    summary = {
        "run_id": "fleet",
        "started_ms": 1000,
        "total": {"figures": {"latency": {}}},
        "agents": [{"name": f"agent-{a:04}", "figures": {"latency": {}}} for a in range(n_agents)],
    }
    return RunData(
        run_dir=Path("fleet"), summary=summary, error_kinds=(), cluster_total=total, cluster_rows=(), agent_totals=rows
    )


def test_a_thousand_agents_are_the_busiest_and_the_rest_summed_not_a_thousand_lines():
    html = render_report(fleet_run(1000))
    charts = {d["title"]: d for d in map(json.loads, DATA.findall(html))}
    by_agent = charts["Requests/s by agent"]
    assert len(by_agent["series"]) == MAX_LINES == len(by_agent["data"]) - 1
    assert by_agent["series"][0]["name"] == "agent-0999"
    assert by_agent["series"][-1]["name"] == f"other agents ({1000 - MAX_LINES + 1})"
    assert by_agent["data"][-1][0] == sum(range(1000 - MAX_LINES + 1)), "the rest summed at t=0"
    assert all(len(d["series"]) <= MAX_LINES for d in charts.values())


def test_without_the_library_the_report_keeps_its_static_charts_and_says_why(synthetic_run, monkeypatch):
    monkeypatch.setattr(interactive, "chart_library", lambda: None)
    html = render_report(load_run(synthetic_run))
    assert "<script" not in html and html.count('<svg class="chart"') == 6
    assert "installed without its chart library (make report-assets)" in html


def test_the_library_is_installed_here():
    library = interactive.chart_library()
    assert library is not None, "run `make report-assets` (part of `make setup`)"
    assert library.script.startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
    assert "MIT" in library.license and ".uplot" in library.css
    assert "new uPlot(" in library.glue
