"""An agent's report with checks as it enters the controller (rpc/convert.py): check names and
counts past their bounds are refused whole (the hostile-message rule), a failed check's sample
names it."""

from __future__ import annotations

import re

import pytest

from loadfleet.controller.fleet.jobs import ReportLimits
from loadfleet.controller.rpc.convert import BadReport, report_from_proto
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.stats import TOTAL, StatsRow, total_row

TARGET = "http://t:1"
LIMITS = ReportLimits(keys=frozenset({("", TARGET, "r"), ("", TARGET, "s"), ("", TOTAL, TOTAL)}), max_rows=3)


def judged(request: str, n: int, check_failed: int, **checks: tuple[int, int]) -> StatsRow:
    """A row of n 200 responses, `check_failed` of them failing the checks name=(passed, failed)."""
    return StatsRow(
        TARGET,
        request,
        requests=n,
        status=[0, n, 0, 0, 0],
        checks_reported=True,
        reported_check_failed=check_failed,
        checks={name: CheckCount(*pf) for name, pf in checks.items()},
    )


def message(*rows: StatsRow) -> agent_pb2.AgentInterval:
    stats = [r.to_proto(buckets=True) for r in (*rows, total_row(rows))]
    return agent_pb2.AgentInterval(job_id="j", report=stats_pb2.IntervalReport(interval_ms=1000, stats=stats))


def test_a_reports_checks_are_read_and_its_total_merges_them_by_name():
    pb = message(judged("r", 10, 3, welcome=(7, 3), **{"extract csrf": (10, 0)}), judged("s", 4, 1, welcome=(3, 1)))
    report = report_from_proto("a", 1, pb, LIMITS)
    assert [r.ok for r in report.rows] == [7, 3] and (report.total.ok, report.total.failed) == (10, 4)
    assert report.total.checks == {"welcome": CheckCount(10, 4), "extract csrf": CheckCount(10, 0)}


def test_an_older_agents_report_without_checks_counts_4xx_and_5xx_as_failed():
    old = StatsRow(TARGET, "r", requests=10, status=[0, 6, 0, 3, 1])
    report = report_from_proto("a", 1, message(old), LIMITS)
    assert (report.total.check_failed, report.total.ok, report.total.failed) == (4, 6, 4)


def _with(pb: agent_pb2.AgentInterval, *names: str, row: int = 0) -> agent_pb2.AgentInterval:
    pb.report.stats[row].checks.extend(stats_pb2.CheckCount(name=n, passed=1) for n in names)
    return pb


@pytest.mark.parametrize(
    "pb, refused",
    [
        (_with(message(judged("r", 10, 0)), *(f"c{i}" for i in range(33))), "has more than 32 checks"),
        (_with(message(judged("r", 10, 0)), "x" * 65), "a check name of 65 bytes (at most 64)"),
        (_with(message(judged("r", 10, 0)), "ok\x1b[2J"), "control characters"),
        (_with(message(judged("r", 10, 0)), ""), "a check without a name"),
        # the total may name every row's checks, not others
        (_with(message(judged("r", 10, 0, a=(1, 0))), "b", row=1), "total row names a check none of its rows has"),
        (message(judged("r", 10, 11)), "11 responses that failed a check of its 10"),
        (message(judged("r", 10, 0, a=(2**40 + 1, 0))), "more than one interval can hold"),
    ],
)
def test_checks_past_their_bounds_refuse_the_report(pb, refused):
    with pytest.raises(BadReport, match=re.escape(refused)):
        report_from_proto("a", 1, pb, LIMITS)


def test_the_total_row_may_name_32_checks_per_row_of_the_report():
    rows = [
        judged("r", 10, 0, **{f"r{i}": (1, 0) for i in range(32)}),
        judged("s", 10, 0, **{f"s{i}": (1, 0) for i in range(32)}),
    ]
    report = report_from_proto("a", 1, message(*rows), LIMITS)
    assert len(report.total.checks) == 64


@pytest.mark.parametrize("field", ["users_stopped", "sessions_restarted", "check_failed"])
def test_a_users_or_check_count_past_an_interval_is_refused(field):
    pb = message(judged("r", 10, 0))
    setattr(pb.report.stats[0], field, 2**40 + 1)
    with pytest.raises(BadReport, match="more than one interval can hold"):
        report_from_proto("a", 1, pb, LIMITS)


def test_a_failed_check_counted_as_an_error_is_refused():
    pb = message(judged("r", 10, 0))
    pb.report.stats[0].errors.add(kind=stats_pb2.ERROR_KIND_CHECK, count=1)
    for stats in pb.report.stats:  # the row and its total, so they still add up
        stats.requests = 11
    with pytest.raises(BadReport, match="counts failed checks as errors"):
        report_from_proto("a", 1, pb, LIMITS)


def test_a_failed_checks_sample_names_the_check_on_one_printable_line():
    pb = message(judged("r", 10, 1, welcome=(9, 1)))
    pb.report.error_samples.add(
        target=TARGET, request="r", kind=stats_pb2.ERROR_KIND_CHECK, check="welcome", message="body lacks 'Hi'\n"
    )
    pb.report.error_samples.add(target=TARGET, request="r", kind=stats_pb2.ERROR_KIND_RESET, message="reset")
    samples = report_from_proto("a", 1, pb, LIMITS).error_samples
    assert samples[0].startswith(f"{TARGET} r: welcome: body lacks 'Hi'") and "\n" not in samples[0]
    assert samples[1] == f"{TARGET} r: reset"
