"""Figures per scenario on published intervals (issue 31 S7): each scenario's total row, the
window's counts per (agent, scenario), stop conditions and thresholds scoped to a scenario,
a step's figures per scenario and the knee from the swept one, the run's totals per scenario."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.progress import RunProgress
from loadfleet.controller.analysis.steps import StepMeter
from loadfleet.controller.analysis.stops import StopWatch
from loadfleet.controller.analysis.summary import summarize_run
from loadfleet.controller.analysis.sweep import knee_search, level_points
from loadfleet.controller.analysis.thresholds import ThresholdWatch
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.model.stepresult import StepResult, StepState
from loadfleet.controller.model.thresholdresult import Outcome
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.plan.stops import ErrorStop, LatencyStop, StopConditions
from loadfleet.controller.plan.thresholds import Metric, NoData, Stat, StatKind, Threshold
from loadfleet.controller.stream.contract import FinalInterval, StepEnd, StepWindow
from loadfleet.wire.stats import StatsRow
from support.streamdata import PLAN, closed, interval, row, window

WEB, API = "http://t:1", "http://t:2"


def scenario_row(scenario: str, n: int, target: str = WEB, request: str = "r", latency_ms: float = 1.0, **kw):
    r = row(n, target, request, [round(latency_ms * 1000)] * n, **kw)
    r.scenario = scenario
    return r


def shop_interval(step: StepWindow, at_s: int, *, browse=(100, 0, 5.0), checkout=(1, 0, 50.0)) -> FinalInterval:
    """Agents a and b: `browse` on both, `checkout` (None: no rows) on b only; each scenario
    as (requests, failed, latency ms)."""
    a = [scenario_row("browse", browse[0], failed=browse[1], latency_ms=browse[2])]
    b = [scenario_row("browse", browse[0], API, failed=browse[1], latency_ms=browse[2])]
    if checkout is not None:
        b.append(scenario_row("checkout", checkout[0], API, "pay", failed=checkout[1], latency_ms=checkout[2]))
    return interval(step, step.load_start_ms + at_s * 1000, a=a, b=b)


# ---------------------------------------------------------------- the stream's rows


def test_each_scenario_has_its_total_row_and_a_plain_interval_none():
    step = window()
    both = shop_interval(step, 0)
    assert [t.scenario for t in both.scenario_totals] == ["browse", "checkout"]
    browse = both.scenario_total("browse")
    assert browse is not None and (browse.target, browse.request, browse.requests) == ("*", "*", 200)
    assert both.scenario_total("checkout").requests == 1 and both.total.requests == 201
    assert shop_interval(step, 1, checkout=None).scenario_total("checkout") is None
    plain = interval(step, step.load_start_ms, a=[row(5)])
    assert plain.scenario_totals == () and plain.scenario_total("") is None


def test_the_window_counts_an_agents_requests_per_scenario():
    step = window()
    c = closed(
        step, step.load_start_ms, b=[scenario_row("browse", 7), scenario_row("checkout", 3, API, "pay")], a=[row(2)]
    )
    assert (c.requests_of("b"), c.requests_of("b", "browse"), c.requests_of("b", "checkout")) == (10, 7, 3)
    assert (c.requests_of("b", "gone"), c.requests_of("a", ""), c.requests_of("nobody", "browse")) == (0, 2, 0)


# ---------------------------------------------------------------- stop conditions


@pytest.mark.parametrize(
    ("conditions", "stops_at"),
    [
        # checkout's one request a second fails, browse's 200 never: a condition on browse
        # never stops, one on checkout stops after 3 s of its rows (the interval without them
        # does not count and does not break the streak), one on the whole run never (1 of 201).
        (StopConditions(error_pct=ErrorStop(5, 3, "browse")), None),
        (StopConditions(error_pct=ErrorStop(5, 3, "checkout")), 3),
        (StopConditions(error_pct=ErrorStop(5, 3)), None),
        # checkout's p99 is 50 ms, browse's 5 ms: the whole run's p99 (1 of 201 at 50 ms) is browse's
        (StopConditions(latency=LatencyStop(99, 20, 2, scenario="checkout")), 2),
        (StopConditions(latency=LatencyStop(99, 20, 2, scenario="browse")), None),
        (StopConditions(latency=LatencyStop(99, 20, 2)), None),
    ],
)
def test_a_stop_on_one_scenario_watches_that_scenario_only(conditions, stops_at):
    step = window()
    reasons = []
    watch = StopWatch(conditions, 1000, on_stop=reasons.append)
    checkouts = [(1, 1, 50.0), None, (1, 1, 50.0), (1, 1, 50.0), (1, 1, 50.0)]
    for at_s, checkout in enumerate(checkouts):
        watch.on_interval(shop_interval(step, at_s, checkout=checkout))
        if reasons:
            break
    if stops_at is None:
        assert reasons == []
    else:
        assert len(reasons) == 1 and at_s == stops_at, (at_s, reasons)
        assert reasons[0].text.startswith("scenario checkout: ")


# ---------------------------------------------------------------- thresholds


def p99(limit_ms: float, **scope) -> Threshold:
    t = Threshold(
        name="", metric=Metric.LATENCY, limit=limit_ms, below=True, stat=Stat(StatKind.PERCENTILE, 99), **scope
    )
    return Threshold(**{**t.__dict__, "name": f"{t.text} {t.scope}"})


def test_a_threshold_scoped_to_a_scenario_judges_its_rows_only():
    step = window()
    watch = ThresholdWatch(
        [p99(20), p99(20, scenario="checkout"), p99(20, scenario="checkout", request="pay"), p99(20, scenario="late")],
        interval_ms=1000,
        targets={"api": API},
    )
    for at_s in range(3):
        watch.on_interval(shop_interval(step, at_s))
    whole, checkout, pay, late, _some_ok = watch.results()
    assert (whole.outcome, whole.scope) == (Outcome.PASSED, "cluster")  # browse's 200 requests hold its p99
    assert (checkout.outcome, checkout.scope) == (Outcome.FAILED, "scenario checkout")
    assert checkout.value == pytest.approx(50, rel=0.01)
    assert (pay.outcome, pay.scope) == (Outcome.FAILED, "scenario checkout, request pay")
    assert (late.outcome, late.value) == (Outcome.FAILED, None)  # never ran: on_no_data (fail)


def test_a_scenario_that_never_ran_passes_with_on_no_data_pass_and_its_rate_counts_its_intervals_only():
    step = window()
    rps = Threshold(name="rps", metric=Metric.RPS, limit=9, below=False, scenario="checkout")
    never = Threshold(name="never", metric=Metric.RPS, limit=1, below=False, scenario="late", on_no_data=NoData.PASS)
    watch = ThresholdWatch([rps, never], interval_ms=1000)
    for at_s, checkout in enumerate([(10, 0, 1.0), None, None, (10, 0, 1.0)]):
        watch.on_interval(shop_interval(step, at_s, checkout=checkout))
    by_name = {r.name: r for r in watch.results()}
    # 20 requests in its 2 intervals: 10/s, not 20 over 4 s
    assert (by_name["rps"].outcome, by_name["rps"].value) == (Outcome.PASSED, 10.0)
    assert (by_name["never"].outcome, by_name["never"].reason) == (Outcome.PASSED, "no data")


# ---------------------------------------------------------------- steps and the knee


def swept_step(name: str, level: int, search_ok: int, search_ms: float, *, background_ok: int) -> StepResult:
    """A step of 5 measured intervals: `search` (swept) and `background` on agent a."""
    step = window(name, seconds=5)
    meter = StepMeter()
    for i in range(5):
        rows = [
            scenario_row("search", search_ok, latency_ms=search_ms),
            scenario_row("background", background_ok, API, "logo", latency_ms=1.0),
        ]
        meter.on_interval(interval(step, step.load_start_ms + i * 1000, a=rows))
    return meter.result(StepSpec(name, level, level, 1, scenario="search"), step, StepState.FINISHED)


def test_a_step_has_figures_per_scenario_and_the_knee_is_the_swept_ones():
    # search levels 10, 20, 40: its throughput stops growing at 40 while its p99 triples;
    # the background grows (its own load) so the whole step's throughput keeps up.
    results = [
        swept_step("s1", 10, 100, 10.0, background_ok=100),
        swept_step("s2", 20, 200, 10.0, background_ok=400),
        swept_step("s3", 40, 210, 30.0, background_ok=1600),
    ]
    s1 = results[0]
    assert [s.name for s in s1.scenarios] == ["background", "search"]
    assert s1.swept is not None and s1.swept.name == "search" and s1.swept.ok_rps == 100
    assert s1.ok_rps == 200 and s1.curve_point[0] == 100
    assert [p.achieved_rps for p in level_points(results)] == [100, 200, 210]
    knee = knee_search(results, 1).knee
    assert knee is not None and knee.name == "s3" and knee.achieved_rps == 210


def test_a_plain_step_has_no_scenarios_and_its_curve_point_is_its_own():
    step = window(seconds=5)
    meter = StepMeter()
    meter.on_interval(interval(step, step.load_start_ms, a=[row(4, latencies=[1000] * 4)]))
    result = meter.result(StepSpec("main", 1, 1, 1), step, StepState.FINISHED)
    assert result.scenarios == () and result.swept is None
    assert not {"scenarios", "agent_scenario"} & set(meter.snapshot())  # a plain run's journal as before
    assert result.curve_point == (result.ok_rps, result.p99_ms, result.error_pct) and result.ok_rps == 4


def test_the_meter_counts_each_agents_requests_per_scenario_and_restores_them():
    step = window(seconds=5)
    meter = StepMeter()
    meter.on_interval(shop_interval(step, 0, browse=(5, 0, 1.0), checkout=(3, 0, 1.0)))
    meter.on_interval(shop_interval(step, 1, browse=(9, 0, 1.0), checkout=None))
    assert meter.agent_use("main", "b", "checkout") == (3, 3)
    assert meter.agent_use("main", "b", "browse") == (14, 9)
    assert meter.agent_use("main", "b") == (17, 9)
    again = StepMeter()
    again.restore(meter.snapshot())
    assert again.agent_use("main", "b", "checkout") == (3, 3)
    spec = StepSpec("main", 1, 1, 1)
    assert again.result(spec, step, StepState.FINISHED) == meter.result(spec, step, StepState.FINISHED)


# ---------------------------------------------------------------- run totals


def test_run_totals_fold_a_row_per_scenario_over_the_seconds_it_had_rows():
    first, second = window("s1", seconds=4), window("s2", start_ms=20_000, seconds=4)
    totals = RunTotals()
    for step in (first, second):
        for at_s in range(4):
            totals.on_interval(shop_interval(step, at_s, checkout=(10, 1, 1.0) if at_s < 2 else None))
        totals.on_step_end(StepEnd(step, None))  # type: ignore[arg-type]  # the totals read only the window
    assert sorted(totals.scenarios) == ["browse", "checkout"]
    checkout = totals.scenarios["checkout"]
    assert (checkout.row.requests, checkout.row.failed, checkout.seconds) == (40, 4, 4.0)
    assert totals.scenarios["browse"].seconds == 8.0 == totals.measured_s
    assert [r.key for r in totals.scenario_rows("checkout")] == [("checkout", API, "pay")]
    restored = RunTotals.restore(totals.snapshot())
    assert restored.scenarios["checkout"].seconds == 4.0 and restored.scenarios["checkout"].row.requests == 40


def test_plain_totals_keep_no_scenario_and_snapshot_as_before():
    totals = RunTotals()
    step = window()
    totals.on_interval(interval(step, step.load_start_ms, a=[row(3)]))
    assert totals.scenarios == {} and "scenarios" not in totals.snapshot()
    assert isinstance(totals.total(), StatsRow) and totals.total().requests == 3


# ---------------------------------------------------------------- summary.json


SHOP = """
name: shop
duration_s: 5
targets: [{name: web, url: "http://t:1"}, {name: api, url: "http://t:2"}]
scenarios:
  - {name: browse, workload: {requests: [{name: r, path: /}]}, load: {model: closed, clients: 4}}
  - {name: checkout, targets: [api], start_after_s: 1, workload: {requests: [{name: pay, path: /pay}]},
     load: {model: open, rate: 5}, budget: {requests: 9}}
"""
SCENARIO_KEYS = ["name", "model", "load", "start_after_s", "duration_s", "budget", "total", "targets", "requests"]


def run_summary(plan, intervals: list[FinalInterval]) -> dict:
    totals, meter = RunTotals(), StepMeter()
    for one in intervals:
        totals.on_interval(one)
        meter.on_interval(one)
    step = intervals[0].step
    result = meter.result(StepSpec("main", 1, 0, 2), step, StepState.FINISHED)
    progress = RunProgress(agents=["a", "b"], results=[result])
    summary = summarize_run(
        progress, plan, run_id="r", state="finished", message="", run_dir="", started_ms=0, totals=totals, events=[]
    )
    return summary.to_json()


def test_summary_of_a_two_scenario_run_has_a_row_per_scenario_and_every_key_of_a_plain_one():
    plan = parse_plan(SHOP)
    step = window(seconds=5)
    doc = run_summary(
        plan, [shop_interval(step, at_s, checkout=None if at_s == 0 else (1, 0, 50.0)) for at_s in range(5)]
    )
    plain = run_summary(parse_plan(PLAN), [interval(step, step.load_start_ms + i * 1000, a=[row(3)]) for i in range(5)])
    assert set(doc) - set(plain) == {"scenarios"} and "scenarios" not in plain
    browse, checkout = doc["scenarios"]
    assert list(browse)[: len(SCENARIO_KEYS)] == SCENARIO_KEYS and set(browse) == {*SCENARIO_KEYS, "checks", "steps"}
    assert (browse["name"], browse["model"], browse["load"]) == ("browse", "closed", plan.scenarios[0].load.describe())
    assert (checkout["start_after_s"], checkout["duration_s"], checkout["budget"]) == (1.0, None, 9)
    assert checkout["total"]["figures"]["requests"] == 4 and checkout["total"]["figures"]["rps"] == 1.0  # 4 in 4 s
    assert browse["total"]["figures"]["requests"] == 1000 == doc["total"]["figures"]["requests"] - 4
    assert [t["name"] for t in browse["targets"]] == ["http://t:1", "http://t:2"]
    assert [r["name"] for r in checkout["requests"]] == ["pay"]
    assert [(s["step"], s["name"], s["requests"]) for s in checkout["steps"]] == [("main", "checkout", 4)]
    assert [s["name"] for s in doc["steps"][0]["scenarios"]] == ["browse", "checkout"]
    assert "scenarios" not in plain["steps"][0] and doc["load_model"] == "closed"
