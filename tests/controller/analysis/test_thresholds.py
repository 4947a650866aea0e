"""The threshold watch on intervals built by hand: each metric's value, each `over`, the
window's subtract against a re-merge, no data, invalid intervals, aborts after their grace,
events on a change of state only, the verdict and its sentences, and a snapshot restored."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.stops import Condition
from loadfleet.controller.analysis.thresholdfolds import MAX_WINDOW_INTERVALS, WindowFold
from loadfleet.controller.analysis.thresholds import ThresholdWatch
from loadfleet.controller.analysis.thresholdvalues import Tally, value_of
from loadfleet.controller.model.events import EventKind
from loadfleet.controller.model.thresholdresult import Outcome
from loadfleet.controller.model.verdict import Validity, Verdict
from loadfleet.controller.plan.thresholds import (
    Abort,
    Metric,
    NoData,
    Over,
    OverKind,
    Stat,
    StatKind,
    Threshold,
    VerdictRules,
)
from loadfleet.controller.stream.contract import FinalInterval, StepEnd, StepWindow
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.phases import Phase, Phases
from loadfleet.wire.stats import TOTAL, StatsRow, merge_rows

APP, API = "http://127.0.0.1:8081", "http://127.0.0.1:8082"
P99 = Stat(StatKind.PERCENTILE, 99.0)


def step(name: str = "main", *, start_ms: int = 0, seconds: int = 100, warmup_s: int = 0) -> StepWindow:
    return StepWindow(
        name=name,
        index=0,
        job_id="j",
        load="",
        interval_ms=1000,
        load_start_ms=start_ms,
        load_end_ms=start_ms + seconds * 1000,
        warmup_ms=warmup_s * 1000,
    )


def row(
    target=APP, request="page", *, ok=0, s5xx=0, latency_ms=(), waiting_ms=(), connect=(0, 0, 0), queueing=(0, 0, 0)
) -> StatsRow:
    r = StatsRow(target, request, requests=ok + s5xx)
    r.status[1], r.status[4] = ok, s5xx
    if latency_ms:
        r.histogram = Histogram.of([round(ms * 1000) for ms in latency_ms])
    if waiting_ms or connect[0]:
        r.phases = Phases(
            queueing=Phase(*queueing),
            connect=Phase(*connect),
            waiting=Phase(len(waiting_ms), round(sum(waiting_ms) * 1000), round(max(waiting_ms, default=0) * 1000)),
            waiting_histogram=Histogram.of([round(ms * 1000) for ms in waiting_ms]) if waiting_ms else Histogram(),
        )
    return r


def interval(at_s: int, *rows: StatsRow, window: StepWindow | None = None, invalid: bool = False) -> FinalInterval:
    window = window or step()
    total = merge_rows(rows, target=TOTAL, request=TOTAL).get(("", TOTAL, TOTAL)) or StatsRow(TOTAL, TOTAL)
    verdict = Verdict(Validity.INVALID) if invalid else Verdict()
    return FinalInterval(window, window.load_start_ms + at_s * 1000, (), tuple(rows), total, verdict=verdict)


def ok_interval(at_s: int, latency_ms: float = 10.0, n: int = 10, **kw) -> FinalInterval:
    return interval(at_s, row(ok=n, latency_ms=[latency_ms] * n), **kw)


def limit(metric=Metric.LATENCY, value=250.0, *, below=True, stat=None, name="", **kw) -> Threshold:
    t = Threshold(name="", metric=metric, limit=value, below=below, stat=stat, **kw)
    return Threshold(**{**t.__dict__, "name": name or t.text})


class Recorder:
    def __init__(self):
        self.events, self.stops = [], []


def watch(*thresholds: Threshold, rules: VerdictRules | None = None, **kw) -> tuple[ThresholdWatch, Recorder]:
    rec = Recorder()
    w = ThresholdWatch(
        thresholds,
        rules or VerdictRules(require_success=False),
        interval_ms=1000,
        targets={"app": APP, "api": API},
        emit=rec.events.append,
        on_stop=rec.stops.append,
        **kw,
    )
    return w, rec


def feed(w: ThresholdWatch, *intervals: FinalInterval) -> ThresholdWatch:
    for i in intervals:
        w.on_interval(i)
    return w


# ---- values ------------------------------------------------------------------------------

MIXED = row(
    ok=8,
    s5xx=2,
    latency_ms=[1, 2, 3, 4, 5, 6, 7, 8, 9, 100],
    waiting_ms=[1, 3],
    connect=(2, 3000, 2500),
    queueing=(10, 40_000, 9000),  # 4 ms each on average, the longest 9 ms
)


@pytest.mark.parametrize(
    "metric, stat, expected",
    [
        (Metric.LATENCY, P99, 100.0),
        (Metric.LATENCY, Stat(StatKind.MIN), 1.0),
        (Metric.LATENCY, Stat(StatKind.MAX), 100.0),
        (Metric.LATENCY, Stat(StatKind.MEAN), 14.5),
        (Metric.LATENCY, Stat(StatKind.STDDEV), 28.5),
        (Metric.WAITING, Stat(StatKind.MEAN), 2.0),
        (Metric.WAITING, Stat(StatKind.MAX), 3.0),
        (Metric.WAITING, Stat(StatKind.PERCENTILE, 50.0), 1.0),
        (Metric.CONNECT, Stat(StatKind.MEAN), 1.5),
        (Metric.CONNECT, Stat(StatKind.MAX), 2.5),
        (Metric.QUEUEING, Stat(StatKind.MEAN), 4.0),
        (Metric.QUEUEING, Stat(StatKind.MAX), 9.0),
        (Metric.ERROR_PCT, None, 20.0),
        (Metric.RPS, None, 5.0),  # 10 requests in 2 s
        (Metric.OK_RPS, None, 4.0),
        (Metric.REQUESTS, None, 10.0),
        (Metric.OK, None, 8.0),
        (Metric.TLS, Stat(StatKind.MEAN), None),  # plain http: no TLS phase
        (Metric.RECEIVING, Stat(StatKind.MAX), None),
        (Metric.CHECK_PASS_PCT, None, None),  # the scope's requests declare no check of its name
    ],
)
def test_each_metric_reads_its_value_from_the_scope_tally(metric, stat, expected):
    tally = Tally.of(MIXED, 2.0)
    value = value_of(limit(metric, stat=stat), tally)
    assert value == pytest.approx(expected, rel=0.01) if expected is not None else value is None


@pytest.mark.parametrize("metric", [Metric.LATENCY, Metric.WAITING, Metric.ERROR_PCT])
def test_the_value_of_nothing_is_none_never_zero(metric):
    silent = Tally.of(row(), 1.0)  # an interval without a request
    assert value_of(limit(metric, stat=P99 if metric.is_time else None), silent) is None
    assert value_of(limit(Metric.RPS), silent) == 0.0  # a rate of no request over a measured second is 0
    assert value_of(limit(Metric.RPS), Tally()) is None  # nothing measured at all


# ---- over ----------------------------------------------------------------------------------


def test_over_run_folds_every_measured_interval_exactly():
    w, _ = watch(limit(stat=P99, value=50))
    feed(w, *(ok_interval(s, 10, n=99) for s in range(3)), ok_interval(3, 90, n=3))
    (r,) = w.results()
    # 300 at 10 ms and 3 at 90 ms: p99 is the 300th value (10 ms); no interval had one of 90 alone
    assert r.outcome is Outcome.PASSED and r.value == pytest.approx(10.0, rel=0.01) and r.over == "run"


def test_warm_up_intervals_are_not_judged():
    w, _ = watch(limit(stat=P99, value=50))
    warm = step(warmup_s=2)
    feed(w, ok_interval(0, 900, window=warm), ok_interval(1, 900, window=warm), ok_interval(2, 10, window=warm))
    assert w.results()[0].passed and w.measured_intervals == 1


def test_over_step_judges_each_step_and_names_the_failing_ones():
    w, _ = watch(limit(Metric.OK_RPS, 5, below=False, over=Over(OverKind.STEP)))
    s1, s2, s3 = step("s1"), step("s2", start_ms=100_000), step("s3", start_ms=200_000)
    feed(w, ok_interval(0, n=10, window=s1), ok_interval(1, n=10, window=s1))
    w.on_step_end(_end(s1))
    feed(w, ok_interval(0, n=2, window=s2), ok_interval(1, n=4, window=s2))  # 3 ok/s
    feed(w, ok_interval(0, n=1, window=s3))  # a step cut short: judged as it got
    (r,) = w.results()
    assert r.outcome is Outcome.FAILED and r.failing_steps == ("s2", "s3")
    assert r.value == 1.0  # the worst step's
    assert "in step(s) s2, s3" in w.verdict().reasons[0]


def test_over_window_judges_every_full_window_and_the_worst_one_fails():
    w, rec = watch(limit(stat=P99, value=50, over=Over(OverKind.WINDOW, 3)))
    latencies = [10, 10, 10, 90, 10, 10, 10, 10]  # one slow interval: the three windows holding it fail
    feed(w, *(ok_interval(s, ms) for s, ms in enumerate(latencies)))
    (r,) = w.results()
    assert r.outcome is Outcome.FAILED and r.value == pytest.approx(90.0, rel=0.01) and r.over == "window 3 s"
    kinds = [e.kind for e in rec.events]
    assert kinds == [EventKind.THRESHOLD_FAILING, EventKind.THRESHOLD_RECOVERED]
    assert "last 3 s" in rec.events[0].text


def test_a_window_subtracts_its_oldest_interval_to_the_same_tally_as_a_re_merge():
    fold = WindowFold(limit(stat=P99, over=Over(OverKind.WINDOW, 4)), 1000)
    rows = [
        row(ok=5 + i, s5xx=i % 3, latency_ms=[1 + i, 30 * i], waiting_ms=[i + 1], connect=(1, 100 * i, 100 * i))
        for i in range(9)
    ]
    for i, r in enumerate(rows):
        fold.add("main", Tally.of(r, 1.0))
        again = Tally()
        for part in rows[max(0, i - 3) : i + 1]:
            again.add(Tally.of(part, 1.0))
        again.with_maxima([Tally.of(p, 1.0) for p in rows[max(0, i - 3) : i + 1]])
        assert fold.tally == again
    assert len(fold.ring) == 4


def test_a_window_is_bounded_and_a_larger_one_is_refused_naming_the_threshold():
    fold = WindowFold(limit(over=Over(OverKind.WINDOW, MAX_WINDOW_INTERVALS)), 1000)
    for _ in range(MAX_WINDOW_INTERVALS + 50):
        fold.add("main", Tally.of(row(ok=1, latency_ms=[1]), 1.0))
    assert len(fold.ring) == MAX_WINDOW_INTERVALS and fold.tally.requests == MAX_WINDOW_INTERVALS
    with pytest.raises(ValueError, match=r"p99 latency < 250 ms.*601 intervals.*at most 600"):
        WindowFold(limit(stat=P99, over=Over(OverKind.WINDOW, 601)), 1000)


def test_a_step_shorter_than_its_window_is_judged_whole_at_its_end():
    w, _ = watch(limit(stat=P99, value=50, over=Over(OverKind.WINDOW, 30)))
    short = step(seconds=3)
    feed(w, *(ok_interval(s, 90, window=short) for s in range(3)))
    w.on_step_end(_end(short))
    assert w.results()[0].outcome is Outcome.FAILED


# ---- scopes ---------------------------------------------------------------------------------


def test_a_target_or_request_scope_merges_its_rows_only():
    fast_app = row(APP, "page", ok=10, latency_ms=[5] * 10)
    slow_api = row(API, "account", ok=10, latency_ms=[500] * 10)
    by_target = limit(stat=P99, value=100, target="app")
    by_request = limit(stat=P99, value=100, request="account")
    w, _ = watch(by_target, by_request, limit(stat=P99, value=100))
    feed(w, interval(0, fast_app, slow_api))
    app, account, cluster = w.results()
    assert app.passed and app.scope == "target app"
    assert not account.passed and account.scope == "request account"
    assert not cluster.passed


# ---- no data, invalid intervals --------------------------------------------------------------


def test_no_response_fails_a_latency_threshold_unless_its_on_no_data_is_pass():
    strict, lenient = limit(stat=P99), limit(stat=P99, on_no_data=NoData.PASS, name="lenient")
    w, _ = watch(strict, lenient)
    feed(w, interval(0, row(s5xx=0)), interval(1, row()))
    a, b = w.results()
    assert a.outcome is Outcome.FAILED and a.value is None and a.reason == "no response to measure"
    assert b.outcome is Outcome.PASSED and b.value is None and b.reason == "no data"
    assert w.verdict().reasons == ("p99 latency < 250 ms failed: no response to measure (run, cluster)",)


def test_a_check_threshold_on_a_check_the_scope_never_counted_has_no_data():
    w, _ = watch(limit(Metric.CHECK_PASS_PCT, 99.9, below=False, check="logged in"))
    (r,) = feed(w, ok_interval(0)).results()
    assert r.value is None and r.reason == "no check counts measured" and r.outcome is Outcome.FAILED


def test_invalid_intervals_are_left_out_and_many_of_them_make_it_inconclusive():
    w, _ = watch(limit(stat=P99, value=50))
    feed(w, *(ok_interval(s, 10) for s in range(8)), *(ok_interval(s, 900, invalid=True) for s in range(8, 10)))
    (r,) = w.results()
    assert r.outcome is Outcome.INCONCLUSIVE and r.excluded_intervals == 2
    assert r.value == pytest.approx(10.0, rel=0.01)  # the generators' 900 ms left out
    assert r.reason == "2 of 10 intervals were the generators' limit"
    assert not w.verdict().passed
    lenient, _ = watch(limit(stat=P99, value=50), rules=VerdictRules(require_success=False, inconclusive_fails=False))
    assert feed(lenient, *(ok_interval(s, 10) for s in range(8)), ok_interval(8, 900, invalid=True)).verdict().passed


def test_one_invalid_interval_in_ten_is_not_enough_to_be_inconclusive():
    w, _ = watch(limit(stat=P99, value=50))
    feed(w, *(ok_interval(s, 10) for s in range(9)), ok_interval(9, 900, invalid=True))
    assert w.results()[0].outcome is Outcome.PASSED and w.results()[0].excluded_intervals == 1


# ---- the implicit threshold ------------------------------------------------------------------


def test_a_dead_target_fails_the_implicit_threshold_and_a_live_one_passes_it():
    dead, _ = watch(rules=VerdictRules())
    feed(dead, *(interval(s, row(s5xx=5)) for s in range(3)))
    (r,) = dead.results()
    assert r.name == "some response was ok" and r.text == "ok > 0" and r.scope == "cluster" and r.over == "run"
    assert r.outcome is Outcome.FAILED and r.value == 0
    assert dead.verdict().reasons == ("some response was ok (ok > 0) failed: 0 (run, cluster)",)
    alive, _ = watch(limit(stat=P99), rules=VerdictRules())
    assert feed(alive, ok_interval(0)).verdict().passed
    assert [r.name for r in alive.results()] == ["p99 latency < 250 ms", "some response was ok"]  # implicit last


def test_nothing_measured_at_all_fails_the_implicit_threshold():
    w, _ = watch(rules=VerdictRules())
    (r,) = w.results()
    assert r.outcome is Outcome.FAILED and r.value is None and not w.verdict().passed


def test_the_implicit_threshold_counts_invalid_intervals_too():
    w, _ = watch(rules=VerdictRules())
    feed(w, ok_interval(0, invalid=True))
    assert w.verdict().passed and w.results()[0].excluded_intervals == 0


# ---- live: events and aborts ---------------------------------------------------------------


def test_events_come_on_a_change_of_state_only_and_followers_see_who_fails():
    w, rec = watch(limit(Metric.ERROR_PCT, 10, name="few errors"))
    feed(w, interval(0, row(ok=10)), interval(1, row(ok=10)))
    assert rec.events == [] and w.failing_now == ()
    feed(w, interval(2, row(s5xx=30)))  # 30 of 50 failed so far
    assert [e.kind for e in rec.events] == [EventKind.THRESHOLD_FAILING] and w.failing_now == ("few errors",)
    assert rec.events[0].text == "threshold few errors (error_pct < 10 %) failing: 60.0 % (run so far, cluster)"
    feed(w, interval(3, row(s5xx=1)))  # still failing: no event
    assert len(rec.events) == 1
    feed(w, *(interval(s, row(ok=100)) for s in range(4, 8)))
    assert [e.kind for e in rec.events] == [EventKind.THRESHOLD_FAILING, EventKind.THRESHOLD_RECOVERED]
    assert w.failing_now == ()
    (r,) = w.results()
    assert r.passed and r.first_failed_ms == 3000  # the end of the first failing interval


def test_abort_waits_for_its_grace_then_stops_the_run_once():
    w, rec = watch(limit(stat=P99, value=50, abort=Abort(grace_s=5)))
    feed(w, *(ok_interval(s, 90) for s in range(4)))
    assert rec.stops == []  # failing since the first interval, but only 4 s of load
    feed(w, ok_interval(4, 90))
    (stop,) = rec.stops
    assert stop.condition is Condition.THRESHOLD and stop.step == "main" and "after 5 s of load" in stop.text
    feed(w, ok_interval(5, 90))
    assert len(rec.stops) == 1 and [e.kind for e in rec.events].count(EventKind.THRESHOLD_ABORT) == 1
    (r,) = w.results()
    assert r.aborted and r.outcome is Outcome.FAILED and "its abort ended the run" in r.reason


def test_the_grace_counts_warm_up_load_and_a_passing_threshold_never_aborts():
    w, rec = watch(limit(stat=P99, value=50, abort=Abort(grace_s=3)), limit(stat=P99, value=500, abort=Abort()))
    warm = step(warmup_s=3)
    feed(w, *(ok_interval(s, 90, window=warm) for s in range(3)))
    assert rec.stops == [] and w.load_s == 3.0
    feed(w, ok_interval(3, 90, window=warm))
    assert len(rec.stops) == 1 and "p99 latency < 50 ms" in rec.stops[0].text
    assert [r.aborted for r in w.results()] == [True, False]


# ---- a run taken over --------------------------------------------------------------------------


@pytest.mark.parametrize("over", [Over(), Over(OverKind.STEP), Over(OverKind.WINDOW, 3)], ids=lambda o: o.label)
def test_a_snapshot_restored_goes_on_to_the_same_results(over):
    thresholds = (limit(stat=P99, value=50, over=over), limit(Metric.OK_RPS, 9, below=False, over=over))
    intervals = [ok_interval(s, 90 if s in (2, 6) else 10, n=8 + s % 3) for s in range(9)]
    whole, _ = watch(*thresholds, rules=VerdictRules())
    feed(whole, *intervals)
    before, _ = watch(*thresholds, rules=VerdictRules())
    feed(before, *intervals[:5])
    after, _ = watch(*thresholds, rules=VerdictRules())
    after.restore(before.snapshot())
    feed(after, *intervals[5:])
    assert after.results() == whole.results() and after.verdict() == whole.verdict()


def test_a_snapshot_of_other_thresholds_is_refused():
    w, _ = watch(limit(stat=P99))
    other, _ = watch()
    with pytest.raises(ValueError, match="holds 0 thresholds; the plan has 1"):
        w.restore(other.snapshot())


def _end(window: StepWindow) -> StepEnd:
    return StepEnd(window, result=None)  # the watch reads only the step's window


def test_a_tally_reads_back_from_its_checkpoint_and_from_one_of_before_the_queueing_phase():
    tally = Tally.of(MIXED, 2.0)
    doc = tally.to_doc()
    again = Tally.from_doc(doc)
    assert value_of(limit(Metric.QUEUEING, stat=Stat(StatKind.MAX)), again) == 9.0
    assert value_of(limit(Metric.CONNECT, stat=Stat(StatKind.MEAN)), again) == 1.5
    del doc["queueing"]  # a checkpoint written by a controller of before the queueing phase
    older = Tally.from_doc(doc)
    assert value_of(limit(Metric.QUEUEING, stat=Stat(StatKind.MEAN)), older) is None
    assert value_of(limit(Metric.CONNECT, stat=Stat(StatKind.MEAN)), older) == 1.5
