from loadfleet.controller.aggregate import RunAggregator
from loadfleet.wire.stats import StatsRow


def row(n, target="t", samples=()):
    r = StatsRow(target, "r", requests=n, status=[0, n, 0, 0, 0])
    for s in samples:
        r.histogram.record_value(s)
    return r


def test_interval_is_due_when_every_agent_reported():
    agg = RunAggregator(["a", "b"])
    agg.add("a", 1000, [row(1)])
    assert agg.due(now_ms=1500, interval_ms=1000, grace_ms=2000) == []
    agg.add("b", 1000, [row(2)])
    assert agg.due(now_ms=1500, interval_ms=1000, grace_ms=2000) == [1000]
    assert agg.due(now_ms=1500, interval_ms=1000, grace_ms=2000) == [], "published once"
    assert agg.cluster_total(1000).requests == 3


def test_missing_agent_waits_for_grace_then_late_report_revises():
    agg = RunAggregator(["a", "b"])
    agg.add("a", 1000, [row(1)])
    assert agg.due(now_ms=4000, interval_ms=1000, grace_ms=2000) == [1000]
    assert agg.cluster_total(1000).requests == 1
    assert agg.add("b", 1000, [row(5)]) is True
    assert agg.cluster_total(1000).requests == 6


def test_lost_agent_is_no_longer_awaited():
    agg = RunAggregator(["a", "b"])
    agg.add("a", 1000, [row(1)])
    agg.drop_agent("b")
    assert agg.due(now_ms=1100, interval_ms=1000, grace_ms=5000) == [1000]


def test_resend_replaces_not_doubles():
    agg = RunAggregator(["a"])
    agg.add("a", 1000, [row(4)])
    agg.add("a", 1000, [row(4)])
    assert agg.cluster_total(1000).requests == 4


def test_run_totals_by_target_and_agent():
    agg = RunAggregator(["a", "b"])
    agg.add("a", 1000, [row(1, "t1", [100]), row(2, "t2", [200, 300])])
    agg.add("b", 1000, [row(3, "t1", [400, 500, 600])])
    agg.add("a", 2000, [row(4, "t1")])
    by_target = agg.run_total(request="*")
    assert by_target[("t1", "*")].requests == 8
    assert by_target[("t2", "*")].requests == 2
    assert agg.run_total(target="*", request="*", agent_id="b")[("*", "*")].requests == 3
    total = agg.run_total(target="*", request="*")[("*", "*")]
    assert total.histogram.get_total_count() == 6
    assert total.histogram.get_max_value() == 600
