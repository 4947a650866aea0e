"""Stop conditions on cluster intervals: streaks, resets, empty intervals."""

from __future__ import annotations

from loadfleet.controller.analysis.stops import StopWatch
from loadfleet.controller.plan.stops import ErrorStop, LatencyStop, Statistic, StopConditions
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow


def interval(requests: int, failed: int = 0, latency_ms: float = 1.0) -> StatsRow:
    row = StatsRow("*", "*", requests=requests)
    row.status[1] = requests - failed
    row.status[4] = failed
    row.histogram = Histogram.of([int(latency_ms * 1000)], count=requests) if requests else row.histogram
    return row


def feed(watch: StopWatch, rows):
    return [watch.observe(r) for r in rows]


def test_error_rate_must_hold_for_for_s():
    watch = StopWatch(StopConditions(error_pct=ErrorStop(5, 3)), 1000)
    out = feed(
        watch,
        [
            interval(100, 10),
            interval(100, 10),
            interval(100, 1),
            interval(100, 10),
            interval(100, 20),
            interval(0),
            interval(100, 6),
        ],
    )
    assert out[:6] == [None] * 6  # the streak broke at the third interval; the empty one changes nothing
    assert out[6].condition == "error_pct" and "20.0 %" in out[6].text


def test_latency_percentile():
    watch = StopWatch(StopConditions(latency=LatencyStop(99, 8000, 2)), 1000)
    out = feed(watch, [interval(50, latency_ms=9000), interval(50, latency_ms=9500)])
    assert out[0] is None and out[1].condition == "latency" and "p99" in out[1].text


def test_latency_mean_is_siege_patience_where_a_percentile_would_stop_earlier():
    """Most requests fast, a tenth at 20 s: the mean (~2 s) stays under 8 s, p99 does not."""
    row = interval(90, latency_ms=1.0)
    row.requests += 10
    row.status[1] += 10
    row.histogram = row.histogram + Histogram.of([20_000_000], count=10)
    mean = StopWatch(StopConditions(latency=LatencyStop(99, 8000, 1, Statistic.MEAN)), 1000)
    p99 = StopWatch(StopConditions(latency=LatencyStop(99, 8000, 1)), 1000)
    assert mean.observe(row) is None and p99.observe(row).condition == "latency"
    stopped = mean.observe(interval(50, latency_ms=9000))
    assert stopped.condition == "latency" and stopped.text.startswith("mean latency above 8000 ms")
    doc = StopConditions(latency=LatencyStop(99, 8000, 1, Statistic.MEAN)).to_doc()
    assert StopConditions.from_doc(doc).latency.statistic is Statistic.MEAN


def test_no_conditions_never_stop_and_reset_forgets():
    assert feed(StopWatch(None, 1000), [interval(10, 10)] * 5) == [None] * 5
    watch = StopWatch(StopConditions(error_pct=ErrorStop(5, 2)), 1000)
    watch.observe(interval(10, 10))
    watch.reset()
    assert watch.observe(interval(10, 10)) is None


def test_as_a_consumer_it_watches_each_steps_measured_intervals_and_stops_once():
    from support.streamdata import interval as published
    from support.streamdata import row, window

    stops = []
    watch = StopWatch(StopConditions(error_pct=ErrorStop(5, 2)), 1000, on_stop=stops.append)
    s1 = window("s1", start_ms=0, seconds=3, warmup_ms=1000)
    watch.on_interval(published(s1, 0, a=[row(10, failed=10)]))  # warm-up: not measured
    watch.on_interval(published(s1, 1000, a=[row(10, failed=10)]))
    s2 = window("s2", start_ms=3000, seconds=5)
    watch.on_interval(published(s2, 3000, a=[row(10, failed=10)]))  # a new step: streaks start over
    assert stops == []
    for start in (4000, 5000):
        watch.on_interval(published(s2, start, a=[row(10, failed=10)]))
    assert [(r.condition, r.step) for r in stops] == [("error_pct", "s2")]
