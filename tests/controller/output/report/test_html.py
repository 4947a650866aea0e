"""report.html of a synthetic run written by the controller's own run-directory writer."""

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.output.report import REPORT_FILE, load_run, write_report
from loadfleet.controller.output.report.html import MAX_LINES, busiest, failure_series, render_report
from loadfleet.controller.output.report.intervalsread import IntervalRow
from loadfleet.controller.output.report.rundata import RunData

from .conftest import AGENTS, N_INTERVALS, TARGETS, write_synthetic_run

SVG = re.compile(r'<svg class="chart".*?</svg>', re.S)
NS = {"s": "http://www.w3.org/2000/svg"}


def test_the_end_of_a_run_writes_report_html(synthetic_run):
    html = (synthetic_run / REPORT_FILE).read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert f"<h1>loadfleet run {synthetic_run.name}</h1>" in html


def test_a_report_that_cannot_be_written_leaves_the_results_and_logs_why(tmp_path, caplog):
    run_dir = tmp_path / "20300101-000000-abcd"
    (run_dir / REPORT_FILE).mkdir(parents=True)  # in the way of the report
    write_synthetic_run(run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["run_id"] == run_dir.name
    assert (run_dir / "intervals.csv").exists() and (run_dir / "latency.hlog").exists()
    assert f"{run_dir / REPORT_FILE} not written: cannot write" in caplog.text


def test_the_header_and_summary_table_show_the_summary(synthetic_run):
    html = (synthetic_run / REPORT_FILE).read_text()
    summary = json.loads((synthetic_run / "summary.json").read_text())
    assert "synthetic &lt;plan&gt;" in html and "synthetic <plan>" not in html
    assert f"2: {', '.join(AGENTS)}" in html
    total = summary["total"]["figures"]
    total_row = re.search(r"<tr><td>total</td>(.*?)</tr>", html).group(1)
    cells = re.findall(r"<td>(.*?)</td>", total_row)
    assert cells[0] == f"{total['requests']:,}"
    assert cells[1] == f"{total['rps']:,.1f}"
    assert cells[2] == f"{total['ok_rps']:,.1f}" and total["ok_rps"] < total["rps"], "successes, not attempts"
    assert cells[7] == f"{total['latency']['p50_ms']:.3f}"
    assert cells[-1] == "connect_refused 14"
    for name in (*TARGETS, *AGENTS, "home"):
        assert f"<td>{name}</td>" in html


def test_the_report_has_the_six_plots_each_with_lines(synthetic_run):
    html = (synthetic_run / REPORT_FILE).read_text()
    svgs = [ET.fromstring(s) for s in SVG.findall(html)]
    titles = [svg.find("s:title", NS).text for svg in svgs]
    assert titles == [
        "Requests/s (cluster)",
        "Latency percentiles (cluster, log scale)",
        "Failures by kind (cluster)",
        "Concurrent users and open connections (cluster)",
        "Requests/s by target",
        "Requests/s by agent",
    ]
    names = {
        t: [g.get("data-name") for g in svg.iterfind(".//s:g[@class='series']", NS)] for t, svg in zip(titles, svgs)
    }
    assert names["Latency percentiles (cluster, log scale)"] == ["p50", "p90", "p99", "max"]
    assert names["Failures by kind (cluster)"] == ["connect_refused"]
    assert sorted(names["Requests/s by target"]) == sorted(TARGETS)
    assert names["Requests/s by agent"] == list(AGENTS)
    assert all(svg.find(".//s:polyline", NS) is not None for svg in svgs)
    assert "no data" not in html


def test_the_agent_lost_event_is_marked_on_the_plots_and_listed(synthetic_run):
    html = (synthetic_run / REPORT_FILE).read_text()
    assert html.count('<g class="marker"><title>agent_lost: agent-b lost') == 6
    events = re.search(r'<table class="events">.*?</table>', html, re.S).group(0)
    assert events.count("<tr>") == 1 + 3
    assert "+4.3 s" in events and "-2.0 s" in events
    assert "finished &lt;done&gt;" in events


def test_the_series_are_the_intervals_of_the_run(synthetic_run):
    run = load_run(synthetic_run)
    rps = dict(run.total_series("rps"))
    assert sorted(rps) == [float(i) for i in range(N_INTERVALS)]
    assert rps[2.0] == (120 + 57) + (121 + 57)  # both agents, refusals count as requests
    assert rps[4.0] == 140 + 50  # agent-b lost
    by_agent = run.by_agent("rps")
    assert [len(by_agent[a]) for a in AGENTS] == [N_INTERVALS, 4]
    by_target = run.by_target("requests")
    assert sum(y for _, y in by_target[TARGETS[1]]) == 50 * (N_INTERVALS + 4) + 14
    (refused,) = failure_series(run)
    assert dict(refused.points) == {float(i): (14.0 if i == 2 else 0.0) for i in range(N_INTERVALS)}


def _run(rows: list[IntervalRow]) -> RunData:
    return RunData(
        run_dir=Path("r"),
        summary={"run_id": "r", "started_ms": 1000, "total": {}},
        error_kinds=("reset",),
        cluster_total=tuple(rows),
        cluster_rows=(),
        agent_totals=(),
    )


def test_an_interval_without_responses_is_a_gap_in_latency_not_zero():
    # requests and responses: 3 of 3, none, 4 of 4, 5 transport errors and no response
    run = _run(
        [
            IntervalRow(
                1000 + 1000 * i,
                "cluster",
                "",
                "*",
                "*",
                {"requests": n, "status_2xx": ok, "p99_ms": 5.0 if ok else 0.0, "err_reset": 0},
            )
            for i, (n, ok) in enumerate(((3, 3), (0, 0), (4, 4), (5, 0)))
        ]
    )
    latency = run.latency_series("p99_ms")
    assert latency[0] == (0.0, 5.0) and latency[2] == (2.0, 5.0)
    assert [math.isnan(y) for _, y in latency] == [False, True, False, True]
    assert [s.name for s in failure_series(run)] == ["failures"]  # no failure: one flat line


def test_more_lines_than_a_chart_can_hold_are_summed_into_one():
    series = {f"t{i:02}": ((0.0, float(i)), (1.0, float(i))) for i in range(MAX_LINES + 3)}
    lines = busiest(series, "other targets")
    assert len(lines) == MAX_LINES
    assert lines[0].name == f"t{MAX_LINES + 2:02}"  # the busiest first
    assert lines[-1].name == "other targets (4)"
    assert lines[-1].points == ((0.0, 0 + 1 + 2 + 3), (1.0, 0 + 1 + 2 + 3))
    assert [s.name for s in busiest({"a": ((0.0, 1.0),)}, "x")] == ["a"]


def test_the_report_is_self_contained(synthetic_run):
    html = render_report(load_run(synthetic_run))
    for fetching in ("<link", "<img", "<iframe", "src=", "url(", "@import", "fetch(", "XMLHttpRequest"):
        assert fetching not in html
    assert html.count("<script>") == 2, "uPlot and charts.js, inline"
    addresses = set(re.findall(r"https?://[^\s\"<]+", html))
    # a namespace, text, and the library's home in its licence comment
    assert addresses == {"http://www.w3.org/2000/svg", *TARGETS, "https://github.com/leeoniya/uPlot"}


def test_write_report_to_another_file(synthetic_run, tmp_path):
    out = write_report(synthetic_run, tmp_path / "elsewhere.html")
    assert out == tmp_path / "elsewhere.html"
    assert out.read_text() == (synthetic_run / REPORT_FILE).read_text()
    assert not list(tmp_path.glob("*.tmp"))


def _edit_summary(run_dir, change) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    change(summary)
    (run_dir / "summary.json").write_text(json.dumps(summary))


def _set_cell(path, *, line: int, column: int, value: str) -> None:
    lines = path.read_text().splitlines()
    cells = lines[line].split(",")
    cells[column] = value
    lines[line] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d.rename(d.with_name("gone")), "no such run directory"),
        (lambda d: (d / "summary.json").unlink(), "not a run directory with results (no summary.json"),
        (lambda d: (d / "summary.json").write_text("{not json"), "summary.json: unreadable"),
        (lambda d: (d / "summary.json").write_text("[1, 2]"), "not a loadfleet run summary"),
        (
            lambda d: _edit_summary(d, lambda s: s["total"]["figures"].update(rps="fast")),
            "total.figures must hold numbers",
        ),
        (
            lambda d: _edit_summary(d, lambda s: s["agents"][1]["figures"]["latency"].update(p99_ms=None)),
            "agents[1].figures must hold numbers",
        ),
        (lambda d: _edit_summary(d, lambda s: s.update(targets={"a": 1})), "targets must be a list of objects"),
        (lambda d: _edit_summary(d, lambda s: s["total"].update(errors=["reset"])), "total.errors must map names"),
        (
            lambda d: _edit_summary(d, lambda s: s["total"].update(checks={"login": {"passed": "all"}})),
            "total.checks must map names to passed and failed counts",
        ),
        (lambda d: _edit_summary(d, lambda s: s["total"].update(checks=[1])), "total.checks must map names"),
        (lambda d: _edit_summary(d, lambda s: s["events"][0].update(at_ms="soon")), "numeric at_ms"),
        (lambda d: _edit_summary(d, lambda s: s.update(started_ms=True)), "started_ms and duration_s must be numbers"),
        (
            lambda d: _edit_summary(d, lambda s: s.update(thresholds=[{"name": "p99", "outcome": "weird"}])),
            "thresholds[0] must be a threshold's result",
        ),
        (lambda d: _edit_summary(d, lambda s: s.update(thresholds="p99")), "thresholds[0] must be"),
        (lambda d: _edit_summary(d, lambda s: s.update(verdict={"passed": "no"})), "verdict must be null or"),
        (lambda d: (d / "intervals.csv").write_text("a,b\n1,2\n"), "not a loadfleet intervals file"),
        (
            lambda d: (d / "intervals.csv").write_text((d / "intervals.csv").read_text() + "1,cluster,,*,*,5\n"),
            "columns, expected",
        ),
        (
            lambda d: _set_cell(d / "intervals.csv", line=1, column=5, value="five"),
            "intervals.csv:2: could not convert",
        ),
    ],
)
def test_a_damaged_run_directory_is_one_clear_error(synthetic_run, damage, message):
    damage(synthetic_run)
    with pytest.raises(UsageError) as caught:
        load_run(synthetic_run)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_run_directory_without_intervals_still_reports(synthetic_run):
    (synthetic_run / "intervals.csv").unlink()
    html = render_report(load_run(synthetic_run))
    assert html.count('class="no-data"') == 6
    assert "connect_refused 14" in html


def test_the_header_counts_the_intervals_that_measured_the_generators():
    from pathlib import Path

    from loadfleet.controller.output.report.html import generator_health
    from loadfleet.controller.output.report.intervalsread import IntervalRow
    from loadfleet.controller.output.report.rundata import RunData

    def run(*validities):
        from collections import Counter

        rows = tuple(IntervalRow(i, "cluster", "", "*", "*", {}, v) for i, v in enumerate(validities))
        return RunData(Path("."), {}, (), rows, (), (), {}, "engine", verdicts=dict(Counter(validities)))

    assert generator_health(run("valid", "invalid", "suspect", "valid")) == [
        (
            "generator health",
            "1 invalid and 1 suspect of 4 intervals (the generators, not the targets, may have set "
            "their figures: intervals.csv's validity_reasons says why)",
        )
    ]
    assert generator_health(run("valid", "valid")) == [("generator health", "all 2 intervals valid")]
    assert generator_health(run("", "")) == []


def test_targets_of_a_step_are_shown_side_by_side_only_when_there_are_several():
    from loadfleet.controller.output.report.html import _targets_section

    target = {
        "url": "http://web1",
        "achieved_rps": 1200.0,
        "ok_rps": 1190.0,
        "error_pct": 0.83,
        "mean_ms": 3.5,
        "p50_ms": 2.0,
        "p99_ms": 40.0,
    }
    two = {"name": "s1", "targets": [target, {**target, "url": "http://web2", "p99_ms": 900.0}]}
    section = "".join(_targets_section({"steps": [two, {"name": "s2", "targets": [target]}]}))
    assert "Targets side by side" in section and "http://web2" in section and "900.00" in section
    assert section.count("<tr>") == 3, "a header and the two targets of s1; s2 had one target"
    assert _targets_section({"steps": [{"name": "s2", "targets": [target]}]}) == []


def test_a_long_run_of_many_agents_is_read_in_bounded_points_and_lines(tmp_path, monkeypatch):
    """A soak: more intervals than a chart's points and more agents than its lines. Each point
    is the mean of `stride` intervals (max_ms their maximum); agents beyond the busiest are
    one summed line, so the report holds O(points x lines), not a row per agent and interval."""
    from loadfleet.controller.output.report import intervalsread

    monkeypatch.setattr(intervalsread, "MAX_POINTS", 10)
    path = tmp_path / "intervals.csv"
    lines = ["interval_start_ms,scope,agent,target,request,rps,requests,max_ms,status_2xx"]
    for i in range(95):  # 95 intervals: strides of 10, the last bucket holds 5
        start = 1000 * i
        lines.append(f"{start},cluster,,http://a,/x,{i},{i},{i},{i}")
        lines.append(f"{start},cluster,,*,*,{2 * i},{2 * i},{i},{2 * i}")
        lines += [f"{start},agent,a{n:02},*,*,{n},{n},1,{n}" for n in range(20)]
    path.write_text("\n".join(lines) + "\n")
    _kinds, total, rows, agents, verdicts, _scenarios = intervalsread.read_intervals(path)
    assert len(total) == 10 and [r.start_ms for r in total[:2]] == [0, 10_000] and verdicts == {"": 95}
    assert total[0].values["rps"] == sum(2 * i for i in range(10)) / 10 and total[0].values["max_ms"] == 9
    assert total[-1].values["requests"] == sum(2 * i for i in range(90, 95)) / 5
    assert [(r.target, r.values["rps"]) for r in rows[:1]] == [("http://a", 4.5)]
    names = sorted({r.agent for r in agents})
    assert names == [*(f"a{n}" for n in range(11, 20)), "other agents (11)"]
    other = [r for r in agents if r.agent == "other agents (11)"]
    assert len(other) == 10 and other[0].values["rps"] == sum(range(11)), "the others' sum per interval"


@pytest.mark.parametrize(
    ("streams", "names"), [((0, 0), ["users", "connections"]), ((0, 12), ["users", "connections", "HTTP/2 streams"])]
)
def test_the_concurrency_chart_shows_http2_streams_only_when_a_run_had_some(streams, names):
    from loadfleet.controller.output.report.html import concurrency_series

    rows = tuple(
        IntervalRow(i * 1000, "cluster", "", "*", "*", {"users": 8.0, "active_conns": 2.0, "active_streams": float(n)})
        for i, n in enumerate(streams)
    )
    series = concurrency_series(RunData(Path("."), {}, (), rows, (), ()))
    assert [s.name for s in series] == names
    assert [v for _, v in series[-1].points] == ([2.0, 2.0] if len(names) == 2 else [0.0, 12.0])
