"""The `check` measurement (a point per check of each cluster row, per interval) and the
`http` point's `check_failed`."""

from __future__ import annotations

import pytest

from loadfleet.controller.output.sinks.checkpoints import check_points
from loadfleet.controller.output.sinks.output import InfluxOutput
from loadfleet.controller.output.sinks.points import http_points
from loadfleet.controller.stream.contract import Scope
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.stats import StatsRow
from support.streamdata import interval, window

TARGET = "http://127.0.0.1:8080"


def _row(request: str, checks: dict[str, CheckCount], target: str = TARGET) -> StatsRow:
    row = StatsRow(target, request, requests=10, status=[0, 10, 0, 0, 0], checks=dict(checks))
    row.checks_reported = True
    row.reported_check_failed = max((c.failed for c in checks.values()), default=0)
    return row


class Collect:
    def __init__(self):
        self.points = []

    def add(self, points) -> None:
        self.points += points


def test_a_point_per_check_tagged_by_request_and_check_with_its_pass_pct():
    login = _row("login", {"status": CheckCount(10, 0), "extract csrf": CheckCount(7, 3)})
    status, csrf = check_points(run_id="r1", step="s2", interval_start_ms=5000, rows=[login])
    assert status.measurement == "check" and status.time_ms == 5000
    assert dict(csrf.tags) == {
        "run": "r1",
        "step": "s2",
        "scope": "cluster",
        "target": TARGET,
        "request": "login",
        "check": "extract csrf",
    }
    assert dict(csrf.fields) == {"passed": 7, "failed": 3, "pass_pct": 70.0}
    assert dict(status.fields)["pass_pct"] == 100.0
    assert isinstance(dict(status.fields)["pass_pct"], float), (
        "one field type across points (100 as int would conflict)"
    )
    assert csrf.line() == (
        "check,run=r1,step=s2,scope=cluster,target=http://127.0.0.1:8080,request=login,check=extract\\ csrf "
        "passed=7i,failed=3i,pass_pct=70.0 5000"
    )


@pytest.mark.parametrize(
    "rows",
    [
        [_row("home", {})],  # a request without checks
        [_row("account", {"welcome": CheckCount(0, 0)})],  # a check that judged no response this interval
        [_row("*", {"welcome": CheckCount(5, 5)}, target="*")],  # the total row: the same name on two requests
        [_row("*", {"welcome": CheckCount(5, 5)})],  # a target's total
    ],
    ids=["no checks", "judged nothing", "total row", "target total"],
)
def test_no_point_for_nothing_judged_or_a_merged_row(rows):
    assert check_points(run_id="r1", step="main", interval_start_ms=0, rows=rows) == []


def test_the_output_writes_each_intervals_cluster_checks_and_no_agents():
    step = window("main", start_ms=10_000)
    published = interval(
        step,
        11_000,
        a1=[_row("login", {"status": CheckCount(6, 0)})],
        a2=[_row("login", {"status": CheckCount(3, 1)})],
    )
    sink = Collect()
    InfluxOutput("r1", [sink]).on_interval(published)
    checks = [p for p in sink.points if p.measurement == "check"]
    assert [(dict(p.tags)["scope"], dict(p.fields)) for p in checks] == [
        ("cluster", {"passed": 9, "failed": 1, "pass_pct": 90.0})  # the agents' counts merged, exactly
    ]
    http = {
        (dict(p.tags)["scope"], dict(p.tags)["agent"], dict(p.tags)["target"]): dict(p.fields)
        for p in sink.points
        if p.measurement == "http"
    }
    assert http[("cluster", "", "*")]["check_failed"] == 1
    assert http[("agent", "a2", "*")]["check_failed"] == 1 and http[("agent", "a1", "*")]["check_failed"] == 0


@pytest.mark.parametrize(
    ("reported", "status", "check_failed", "ok", "errors"),
    [
        (True, [0, 8, 0, 2, 0], 3, 7, 3),  # checks judged: a 200 that failed one, and the 4xx
        (None, [0, 8, 0, 2, 0], 2, 8, 2),  # a driver without checks: the 4xx and 5xx
    ],
    ids=["checks reported", "no checks reported"],
)
def test_the_http_point_counts_responses_that_failed_a_check_as_errors(reported, status, check_failed, ok, errors):
    row = StatsRow(TARGET, "login", requests=10, status=status)
    if reported:
        row.checks_reported, row.reported_check_failed = True, check_failed
    [point] = http_points(
        run_id="r", step="main", scope=Scope.CLUSTER, agent="", interval_start_ms=0, interval_ms=1000, rows=[row]
    )
    fields = dict(point.fields)
    assert (fields["check_failed"], fields["ok"], fields["errors"]) == (check_failed, ok, errors)
    assert "err_check" not in fields, "a failed check is no error kind: its response came"
