"""report.html's Checks: the console's table worst first (failed checks red), users stopped,
and the pass rate over time — every check together, and the checks that failed each, exact
over a bucket of intervals; no section for a run without checks."""

from __future__ import annotations

import json
import math
import re

import pytest

from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.output.report import REPORT_FILE, checkseries, load_run, write_report
from loadfleet.controller.output.report.checks import pass_rate_chart
from loadfleet.controller.output.report.checktable import CHECK_HEADERS

from .conftest import INTERVAL_MS, N_INTERVALS


def _table(html: str) -> list[tuple[str, list[str]]]:
    body = html.split('<table class="checks">')[1].split("</table>")[0]
    assert re.findall(r"<th>(.*?)</th>", body) == list(CHECK_HEADERS)
    return [
        (cls or "", re.findall(r"<td>(.*?)</td>", cells))
        for cls, cells in re.findall(r'<tr(?: class="(\w+)")?>(.*?)</tr>', body.split("<tbody>")[1])
    ]


def test_the_checks_worst_first_with_the_failed_ones_in_red(checked_run):
    write_report(checked_run)
    html = (checked_run / REPORT_FILE).read_text()
    assert html.index("<h2>Summary</h2>") < html.index("<h2>Checks</h2>") < html.index("<h2>Over time</h2>")
    # 1,714 responses checked each; the first target's lacked the text in the third interval.
    assert _table(html) == [
        ("failed", ["home", "welcome", "1,666", "48", "97.2"]),
        ("failed", ["home", "extract csrf", "1,712", "2", "99.9"]),  # 99.88: never shown as 100.0
        ("", ["home", "status", "1,714", "0", "100.0"]),
    ]
    assert "5,092 passed, 50 failed: 99.0 % of the checks passed" in html
    assert "Users stopped by the plan&#x27;s rules: 2; sessions restarted: 0." in html
    assert "Checks: pass % over time (cluster)" in html


def test_no_checks_section_without_checks(synthetic_run):
    write_report(synthetic_run)
    html = (synthetic_run / REPORT_FILE).read_text()
    assert "<h2>Checks</h2>" not in html and 'class="checks"' not in html


def test_the_pass_rate_over_time_of_every_check_and_of_each_that_failed(checked_run):
    chart = pass_rate_chart(load_run(checked_run))
    every, welcome, csrf = chart.series
    assert (every.name, welcome.name, csrf.name) == ("all checks", "home: welcome", "home: extract csrf")
    assert [x for x, _ in welcome.points] == [i * INTERVAL_MS / 1000 for i in range(N_INTERVALS)]
    # The third interval: 293 of 341 responses had the text (both agents, both targets summed).
    assert [y for _, y in welcome.points] == pytest.approx([100, 100, 100 * 293 / 341, 100, 100, 100])
    assert [y for _, y in csrf.points][2] == pytest.approx(100 * 339 / 341)
    assert min(y for _, y in every.points) < 100 and max(y for _, y in every.points) == 100


def test_a_long_run_is_drawn_in_buckets_whose_pass_pct_is_exact(tmp_path, monkeypatch):
    monkeypatch.setattr(checkseries, "MAX_POINTS", 2)
    lines = ["interval_start_ms,target,request,check,passed,failed"]
    # Four intervals in two buckets; the second bucket's check judged nothing in its last
    # interval (no row), and a third check never failed: not drawn.
    for start, passed, failed in ((0, 9, 1), (1000, 1, 9), (2000, 5, 5)):
        lines += [f"{start},t,login,csrf,{passed},{failed}", f"{start},t,home,status,10,0"]
    lines.append("3000,t,home,status,10,0")
    (tmp_path / checkseries.CHECKS_FILE).write_text("\n".join(lines) + "\n")
    [csrf] = checkseries.worst_check_series(tmp_path, started_ms=0, most=9)
    assert csrf.name == "login: csrf"
    assert csrf.points == ((0.0, 50.0), (2.0, 50.0))  # (9 + 1) of 20, not the mean of 90 % and 10 %


def test_a_bucket_where_a_check_judged_nothing_is_a_gap(tmp_path):
    rows = "0,t,login,csrf,1,1\n1000,t,home,status,1,0\n2000,t,login,csrf,0,2\n"
    (tmp_path / checkseries.CHECKS_FILE).write_text("interval_start_ms,target,request,check,passed,failed\n" + rows)
    [csrf] = checkseries.worst_check_series(tmp_path, started_ms=0, most=9)
    assert csrf.points[0] == (0.0, 50.0) and math.isnan(csrf.points[1][1]) and csrf.points[2] == (2.0, 0.0)
    assert checkseries.worst_check_series(tmp_path, started_ms=0, most=0) == []


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("interval_start_ms,request,passed,failed\n1,r,1,1\n", "no column check"),
        ("interval_start_ms,target,request,check,passed,failed\n1,t,r,c,one,1\n", "checks.csv:2"),
    ],
)
def test_an_unreadable_checks_file_is_named(tmp_path, text, says):
    (tmp_path / checkseries.CHECKS_FILE).write_text(text)
    with pytest.raises(UsageError, match=says):
        checkseries.worst_check_series(tmp_path, started_ms=0, most=9)


@pytest.mark.parametrize(
    ("errors", "status", "text"),
    [
        ({"connect_refused": 12}, {"5xx": 3}, "connect_refused 12, 5xx 3"),  # a run before checks
        ({"check": 3}, {"5xx": 3}, "5xx 3"),  # no check but the status: the 5xx say it
        ({"check": 40, "reset": 1}, {"5xx": 3}, "reset 1, failed a check 40 (5xx 3)"),
        ({"check": 40}, {}, "failed a check 40"),  # 200s that lacked the page's text
        ({"check": 2}, {"4xx": 5}, "failed a check 2 (4xx 5)"),  # expected 404s are ok
        ({}, {}, "-"),
    ],
)
def test_the_failures_say_which_responses_failed_a_check(errors, status, text):
    from loadfleet.controller.model.summarydoc import Entry
    from loadfleet.controller.output.report.figuresrow import failures_text

    assert failures_text(Entry(errors=errors, status=status)) == text


def test_the_failures_chart_has_a_line_of_responses_that_failed_a_check(checked_run, synthetic_run):
    from loadfleet.controller.output.report.html import failure_series

    by_name = {s.name: s for s in failure_series(load_run(checked_run))}
    assert sorted(by_name) == ["connect_refused", "failed a check"]
    assert [y for _, y in by_name["failed a check"].points] == [0, 0, 48, 0, 0, 0]  # per second, 1 s intervals
    assert "failed a check" not in {s.name for s in failure_series(load_run(synthetic_run))}


def test_redirects_followed_are_said_under_checks(synthetic_run):
    path = synthetic_run / "summary.json"
    doc = json.loads(path.read_text())
    doc["total"]["figures"]["redirects"] = 1_234
    path.write_text(json.dumps(doc))
    write_report(synthetic_run)
    html = (synthetic_run / REPORT_FILE).read_text()
    assert "<h2>Checks</h2>" in html
    assert "Redirects followed: 1,234 (checks judged the last hop&#x27;s response" in html
