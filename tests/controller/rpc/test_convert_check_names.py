"""A report may name only the checks its plan declares (fleet/jobs.py ReportLimits.of_plan,
rpc/convert.py `_check_names_problem`): a row naming another check is a bad report, as a row
for an unknown target is; a Gatling project's own simulation names its checks freely."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loadfleet.controller.fleet.jobs import ReportLimits
from loadfleet.controller.plan.parse import load_plan, parse_plan
from loadfleet.controller.rpc.convert import BadReport, report_from_proto
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.stats import TOTAL, StatsRow, total_row

PLANS = Path(__file__).parents[3] / "plans"
LOGIN = load_plan(PLANS / "journey-login.yaml")
TARGET = LOGIN.targets[0].url
LIMITS = ReportLimits.of_plan(LOGIN, max_unnamed_rows=1000)


def judged(request: str, **checks: tuple[int, int]) -> StatsRow:
    """A row of 10 responses of `request` on the plan's target, each check name=(passed, failed)."""
    return StatsRow(
        TARGET,
        request,
        requests=10,
        status=[0, 10, 0, 0, 0],
        checks_reported=True,
        checks={name: CheckCount(*pf) for name, pf in checks.items()},
    )


def message(*rows: StatsRow) -> agent_pb2.AgentInterval:
    stats = [r.to_proto(buckets=True) for r in (*rows, total_row(rows))]
    return agent_pb2.AgentInterval(job_id="j", report=stats_pb2.IntervalReport(interval_ms=1000, stats=stats))


def test_the_limits_hold_each_requests_checks_and_extractions_as_the_engine_names_them():
    names = LIMITS.check_names
    assert names is not None
    assert names["login-page"] == {"login form", "extract csrf"}
    assert names["account"] == {"account page", "account fast"}
    assert names[TOTAL] == {"login form", "extract csrf", "logged in", "account page", "account fast", "cart row added"}


def test_a_report_naming_its_requests_declared_checks_is_read():
    pb = message(
        judged("login-page", **{"login form": (10, 0), "extract csrf": (9, 1)}),
        judged("account", **{"account page": (10, 0), "account fast": (8, 2)}),
    )
    report = report_from_proto("a", 1, pb, LIMITS)
    assert set(report.total.checks) == {"login form", "extract csrf", "account page", "account fast"}


@pytest.mark.parametrize(
    "rows, named",
    [
        ([judged("account", **{"admin page": (1, 0)})], "'admin page'"),  # declared nowhere
        ([judged("account", **{"logged in": (1, 0)})], "'logged in'"),  # another request's check
        ([judged("login", **{"extract token": (1, 0)})], "'extract token'"),  # an extraction it lacks
    ],
)
def test_a_row_naming_a_check_its_request_does_not_declare_refuses_the_report(rows, named):
    with pytest.raises(BadReport, match=re.escape(f"names {named}, which is no check of its request")):
        report_from_proto("a", 1, message(*rows), LIMITS)


def test_the_total_row_may_not_name_an_undeclared_check_either():
    pb = message(judged("account", **{"account page": (10, 0)}))
    pb.report.stats[-1].checks.add(name="sneaked", passed=1)
    with pytest.raises(BadReport, match=re.escape(f"the row ({TOTAL!r}, {TOTAL!r}) names 'sneaked'")):
        report_from_proto("a", 1, pb, LIMITS)


def test_a_plan_without_checks_allows_no_check_name():
    plan = parse_plan(
        "duration_s: 5\ntargets: [{url: 'http://127.0.0.2:8080'}]\n"
        "workload: {requests: [{name: r, path: /}]}\nload: {model: closed, clients: 1}\n"
    )
    limits = ReportLimits.of_plan(plan, max_unnamed_rows=1000)
    row = StatsRow("http://127.0.0.2:8080", "r", requests=1, status=[0, 1, 0, 0, 0], checks_reported=True)
    pb = message(row)
    report_from_proto("a", 1, pb, limits)  # no name: read
    pb.report.stats[0].checks.add(name="status", passed=1)
    with pytest.raises(BadReport, match="names 'status', which is no check of its request"):
        report_from_proto("a", 1, pb, limits)


def test_a_gatling_project_names_its_own_requests_and_checks():
    plan = parse_plan(
        "duration_s: 5\ntargets: [{url: 'http://127.0.0.2:8080'}]\ndriver: gatling\n"
        "gatling: {project: /srv/gatling/demo, simulation: a.B}\nload: {model: closed, clients: 1}\n"
    )
    limits = ReportLimits.of_plan(plan, max_unnamed_rows=1000)
    assert (limits.keys, limits.check_names, limits.max_rows) == (None, None, 1000)
    row = StatsRow("http://anywhere", "its own", requests=1, status=[0, 1, 0, 0, 0], checks_reported=True)
    pb = message(row)
    pb.report.stats[0].checks.add(name="its check", passed=1)
    pb.report.stats[1].checks.add(name="its check", passed=1)
    report = report_from_proto("a", 1, pb, limits)
    assert list(report.total.checks) == ["its check"]
