import random

import pytest

from loadfleet.v1 import stats_pb2
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import TOTAL, StatsRow, error_kind_name, merge_reports, merge_rows


def _row(target, request, samples, **counts):
    return StatsRow(target, request, histogram=Histogram.of(samples), **counts)


def test_a_row_round_trips_through_protobuf_with_every_count():
    row = _row("t", "r", [1, 10, 999, 123_456, 3_000_000], requests=5, status=[0, 5, 0, 0, 0], errors={3: 1}, users=42)
    back = StatsRow.from_proto(row.to_proto())
    assert back == row and back.histogram.total == 5 and back.users == 42


@pytest.mark.parametrize("percentile", [50, 90, 99, 99.9, 100])
def test_merged_percentiles_equal_one_histogram_of_all_samples(percentile):
    rng = random.Random(7)
    parts = [[int(rng.lognormvariate(8, 1.5)) + 1 for _ in range(n)] for n in (10, 500, 3000, 1)]
    rows = [StatsRow.from_proto(_row("t", "r", p, requests=len(p)).to_proto()) for p in parts]
    merged = merge_rows(rows)[("", "t", "r")]
    everything = Histogram.of([v for p in parts for v in p])
    assert merged.histogram == everything
    assert merged.histogram.percentiles([percentile]) == everything.percentiles([percentile])
    assert merged.requests == sum(len(p) for p in parts)


def test_merge_adds_counts_and_keeps_keys_apart():
    a = StatsRow("t1", "r", requests=3, status=[0, 2, 0, 1, 0], errors={1: 2}, bytes_in=100, users=7, redirects=2)
    b = StatsRow("t1", "r", requests=4, status=[0, 4, 0, 0, 0], errors={1: 1, 3: 5}, bytes_in=50, users=5, redirects=6)
    c = StatsRow("t2", "r", requests=1, status=[0, 1, 0, 0, 0], users=1)
    a.active_streams, b.active_streams = 3, 4
    merged = merge_rows([a, b, c])
    # Users and streams are gauges of the same instant on different drivers: they add up.
    assert (merged[("", "t1", "r")].users, merged[("", "t2", "r")].users) == (12, 1)
    assert (merged[("", "t1", "r")].active_streams, merged[("", "t2", "r")].active_streams) == (7, 0)
    assert merged[("", "t1", "r")].requests == 7
    assert merged[("", "t1", "r")].errors == {1: 3, 3: 5}
    assert merged[("", "t1", "r")].bytes_in == 150
    assert merged[("", "t1", "r")].redirects == 8
    assert merged[("", "t2", "r")].requests == 1
    total = merge_rows([a, b, c], target="*", request="*")[("", "*", "*")]
    assert total.requests == 8
    assert a.requests == 3, "inputs are not modified"


def test_ok_and_failed_counts():
    row = StatsRow("t", "r", requests=10, status=[0, 5, 1, 2, 1], errors={1: 1})
    assert row.ok == 6
    assert row.failed == 4


def test_merge_reports_merges_rows_and_final_flag():
    r1 = stats_pb2.IntervalReport(
        interval_start_ms=1000, interval_ms=1000, final=True, stats=[_row("t", "r", [5], requests=1).to_proto()]
    )
    r2 = stats_pb2.IntervalReport(
        interval_start_ms=1000, interval_ms=1000, final=False, stats=[_row("t", "r", [7, 9], requests=2).to_proto()]
    )
    merged = merge_reports([r1, r2])
    assert merged.interval_start_ms == 1000
    assert not merged.final
    assert len(merged.stats) == 1 and merged.stats[0].requests == 3
    assert Histogram.decode(merged.stats[0].latency_histogram).total == 3


def test_an_agents_report_ends_with_its_total_and_a_drivers_total_is_not_merged_again():
    r1 = stats_pb2.IntervalReport(
        interval_start_ms=1000,
        interval_ms=1000,
        stats=[_row("t", "a", [5], requests=1).to_proto(), _row("t", "b", [7, 9], requests=2).to_proto()],
    )
    r2 = merge_reports([r1], with_total=True)  # e.g. a driver that already sends a total
    merged = merge_reports([r1, r2], with_total=True)
    rows = [StatsRow.from_proto(s) for s in merged.stats]
    assert [r.key for r in rows] == [("", "t", "a"), ("", "t", "b"), ("", TOTAL, TOTAL)]
    assert [r.requests for r in rows] == [2, 4, 6]
    assert rows[-1].histogram == Histogram.of([5, 7, 9, 5, 7, 9])


@pytest.mark.parametrize(
    "kind, name",
    [
        (stats_pb2.ERROR_KIND_CONNECT_REFUSED, "connect_refused"),
        (stats_pb2.ERROR_KIND_LOCAL_FDS, "local_fds"),
        (stats_pb2.ERROR_KIND_UNSPECIFIED, "unspecified"),
        (999, "unknown_999"),  # proto3 enums are open: a newer or rogue peer's value (issue 28 B5)
        (-1, "unknown_-1"),
    ],
)
def test_an_error_kind_is_named_and_an_unknown_one_never_raises(kind, name):
    assert error_kind_name(kind) == name


def _open(lag_sum_us: int, max_lag_us: int, late: int) -> StatsRow:
    return StatsRow(
        "t", "r", requests=10, scheduled=10, sent_late=late, max_send_lag_us=max_lag_us, send_lag_sum_us=lag_sum_us
    )


def test_the_send_lag_sum_round_trips_and_merges_by_addition_in_rows_and_reports():
    row = _open(7_900, 2_500, 3)
    pb = row.to_proto(buckets=True)
    assert pb.send_lag_sum_us == 7_900 and StatsRow.from_proto(pb) == row
    merged = merge_rows([row, _open(100, 900, 0), _open(0, 0, 0)])[("", "t", "r")]
    assert (merged.send_lag_sum_us, merged.max_send_lag_us, merged.sent_late) == (8_000, 2_500, 3)
    reports = [stats_pb2.IntervalReport(interval_start_ms=0, interval_ms=1000, stats=[row.to_proto()])] * 2
    rows = [StatsRow.from_proto(s) for s in merge_reports(reports, with_total=True).stats]
    assert [r.send_lag_sum_us for r in rows] == [15_800, 15_800]  # the row and the agent's total


def test_a_report_without_the_send_lag_sum_reads_as_zero_not_measured():
    assert StatsRow.from_proto(stats_pb2.IntervalStats(target="t", request="r", scheduled=5)).send_lag_sum_us == 0


# ---- Checks: what "ok" means (stats.proto IntervalStats.check_failed, checks_reported).


def _legacy(s2xx: int, s4xx: int, s5xx: int, transport: int = 0) -> StatsRow:
    """A row of a driver that judges no checks (Gatling, an older agent)."""
    errors = {stats_pb2.ERROR_KIND_RESET: transport} if transport else {}
    return StatsRow("t", "r", requests=s2xx + s4xx + s5xx + transport, status=[0, s2xx, 0, s4xx, s5xx], errors=errors)


def _judged(s2xx: int, s4xx: int, check_failed: int, transport: int = 0, **checks: tuple[int, int]) -> StatsRow:
    """A row of a driver that judges checks: `checks` as name=(passed, failed)."""
    errors = {stats_pb2.ERROR_KIND_TIMEOUT: transport} if transport else {}
    return StatsRow(
        "t",
        "r",
        requests=s2xx + s4xx + transport,
        status=[0, s2xx, 0, s4xx, 0],
        errors=errors,
        checks_reported=True,
        reported_check_failed=check_failed,
        checks={name: CheckCount(*pf) for name, pf in checks.items()},
    )


@pytest.mark.parametrize(
    "row, check_failed, ok, failed",
    [
        (_legacy(8, 1, 1), 2, 8, 2),  # legacy: 4xx and 5xx failed
        (_legacy(8, 1, 1, transport=3), 2, 8, 5),
        (_legacy(0, 0, 0, transport=4), 0, 0, 4),
        (_judged(8, 2, 0), 0, 10, 0),  # a 4xx the plan expects: ok
        (_judged(8, 0, 3), 3, 5, 3),  # a 200 with an error page: failed
        (_judged(8, 2, 3, transport=1), 3, 7, 4),
        (StatsRow("t", "r", requests=5, status=[0, 3, 0, 0, 0]), 0, 3, 2),  # Gatling's console: KOs without a status
    ],
)
def test_ok_is_responses_without_a_failed_check_and_failed_the_rest(row, check_failed, ok, failed):
    assert (row.check_failed, row.ok, row.failed) == (check_failed, ok, failed)
    assert row.ok + row.failed == row.requests


@pytest.mark.parametrize(
    "parts, reported, check_failed",
    [
        ([_legacy(8, 1, 1), _legacy(5, 0, 2)], False, 4),  # legacy stays legacy: 4xx + 5xx of the sum
        ([_judged(8, 2, 3), _judged(1, 0, 1)], True, 4),
        ([_legacy(8, 1, 1), _judged(8, 2, 0)], True, 2),  # an old agent beside a new one: each by its rule
        ([_judged(8, 2, 0), _legacy(8, 1, 1)], True, 2),  # in either order
        ([_judged(8, 2, 5), _legacy(0, 0, 0, transport=2), _legacy(3, 3, 0)], True, 8),
    ],
)
def test_merged_check_failed_is_the_sum_of_each_rows_own_rule(parts, reported, check_failed):
    for merged in (merge_rows(parts)[("", "t", "r")], _added(parts)):
        assert (merged.checks_reported, merged.check_failed) == (reported, check_failed)
        assert merged.ok == sum(p.ok for p in parts) and merged.failed == sum(p.failed for p in parts)
    assert [p.check_failed for p in parts] == [StatsRow.from_proto(p.to_proto()).check_failed for p in parts]


def _added(parts: list[StatsRow]) -> StatsRow:
    into = StatsRow("t", "r")
    for p in parts:
        into.add(p)
    return into


def test_checks_round_trip_in_the_plans_order_with_users_stopped_and_sessions_restarted():
    row = _judged(8, 2, 3, **{"logged in": (7, 3), "extract csrf": (10, 0), "account": (0, 0)})
    row.users_stopped, row.sessions_restarted, row.redirects = 2, 1, 4
    pb = row.to_proto(buckets=True)
    assert [c.name for c in pb.checks] == ["logged in", "extract csrf", "account"]
    assert (pb.check_failed, pb.checks_reported, pb.users_stopped, pb.sessions_restarted) == (3, True, 2, 1)
    assert pb.redirects == 4
    back = StatsRow.from_proto(pb)
    assert back == row and list(back.checks) == ["logged in", "extract csrf", "account"]


def test_a_message_without_checks_reported_reads_4xx_and_5xx_as_failed_checks_whatever_it_says():
    pb = stats_pb2.IntervalStats(target="t", request="r", requests=4, status_2xx=2, status_5xx=2, check_failed=4)
    row = StatsRow.from_proto(pb)
    assert (row.checks_reported, row.check_failed, row.ok) == (False, 2, 2)
    assert not row.to_proto().checks_reported  # and it travels on as legacy: each side applies the rule


def test_checks_merge_by_name_and_a_total_row_adds_the_same_name_of_different_requests():
    login = _judged(5, 0, 1, **{"status ok": (4, 1), "extract csrf": (5, 0)})
    account = _judged(3, 0, 2, **{"status ok": (1, 2), "welcome": (1, 2)})
    again = _judged(2, 0, 0, **{"extract csrf": (2, 0), "status ok": (2, 0)})
    account.request = "account"
    merged = merge_rows([login, account, again])
    assert merged[("", "t", "r")].checks == {"status ok": CheckCount(6, 1), "extract csrf": CheckCount(7, 0)}
    assert list(merged[("", "t", "r")].checks) == ["status ok", "extract csrf"]  # first seen first
    total = merge_rows([login, account, again], target=TOTAL, request=TOTAL)[("", TOTAL, TOTAL)]
    assert total.checks == {
        "status ok": CheckCount(7, 3),
        "extract csrf": CheckCount(7, 0),
        "welcome": CheckCount(1, 2),
    }
    assert total.check_failed == 3 and login.checks["status ok"] == CheckCount(4, 1), "inputs are not modified"


def test_merge_reports_keeps_checks_and_the_users_a_rule_stopped():
    a = _judged(5, 0, 1, c=(4, 1))
    a.users_stopped = 1
    b = _legacy(3, 1, 0)
    reports = [stats_pb2.IntervalReport(interval_start_ms=0, interval_ms=1000, stats=[r.to_proto()]) for r in (a, b)]
    rows = [StatsRow.from_proto(s) for s in merge_reports(reports, with_total=True).stats]
    for row in rows:  # the (t, r) row and the total
        assert (row.check_failed, row.checks, row.users_stopped) == (2, {"c": CheckCount(4, 1)}, 1)
