"""Sweeps in plans: validation with paths, step names and order, steps.csv."""

from __future__ import annotations

import csv
import io

import pytest
import yaml

from loadfleet.controller.analysis.steps import StepMeter
from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.model.stepresult import StepState
from loadfleet.controller.output.stepscsv import steps_csv
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.steps import expand, step_plan
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.phases import Phase, Phases
from loadfleet.wire.stats import StatsRow
from support.streamdata import interval, window

BASE = {
    "targets": [{"url": "http://127.0.0.2:80"}, {"url": "http://127.0.0.3:80"}, {"url": "http://127.0.0.4:80"}],
    "workload": {"requests": [{"path": "/"}]},
    "load": {"model": "closed"},
    "sweep": {"steps": [1, 2, 4], "step_s": 5, "warmup_s": 1},
}


def plan_of(**changes):
    doc = {**BASE, **changes}
    return parse_plan(yaml.safe_dump(doc))


def test_names_and_order_with_servers_and_repeat():
    plan = plan_of(sweep={"steps": [1, 2], "step_s": 3, "repeat": 2, "servers": [1, 3]})
    assert [s.name for s in expand(plan)] == [
        "k1-s1",
        "k1-s1r2",
        "k1-s2",
        "k1-s2r2",
        "k3-s1",
        "k3-s1r2",
        "k3-s2",
        "k3-s2r2",
    ]
    assert [s.level_name for s in expand(plan)][:2] == ["k1-s1", "k1-s1"]
    last = step_plan(plan, expand(plan)[-1])
    assert (last.load.clients, len(last.targets), last.duration_s, last.sweep) == (2, 3, 3.0, None)
    assert plan.duration_s == 24


def test_open_and_users_levels():
    plan = plan_of(load={"model": "open"}, sweep={"steps": [50.5, 100], "step_s": 2})
    assert step_plan(plan, expand(plan)[0]).load.rate == 50.5
    plan = plan_of(load={"model": "users", "spawn_rate": 10}, sweep={"steps": [5, 10], "step_s": 2})
    assert step_plan(plan, expand(plan)[1]).load.users == 10


def test_users_steps_may_each_have_their_spawn_rate():
    """Locust's series of tests: (users, spawn rate) pairs in one sweep."""
    plan = plan_of(load={"model": "users"}, sweep={"steps": [[100, 10], [200, 20], [400, 40]], "step_s": 5})
    loads = [step_plan(plan, spec).load for spec in expand(plan)]
    assert [(load.users, load.spawn_rate) for load in loads] == [(100, 10), (200, 20), (400, 40)]
    assert parse_plan(plan.to_yaml()) == plan
    mixed = plan_of(load={"model": "users", "spawn_rate": 5}, sweep={"steps": [[100, 10], 200], "step_s": 5})
    assert [step_plan(mixed, spec).load.spawn_rate for spec in expand(mixed)] == [10, 5]
    assert parse_plan(mixed.to_yaml()) == mixed


def test_round_trip():
    plan = plan_of(
        stop={"error_pct": {"above": 5, "for_s": 3}, "latency": {"above_ms": 8000, "for_s": 3}},
        sweep={"steps": [1, 2], "step_s": 3, "repeat": 2, "servers": [1, 2], "stop_at_knee": True},
    )
    assert parse_plan(plan.to_yaml()) == plan
    assert plan.stop.latency.percentile == 99


@pytest.mark.parametrize(
    "changes,paths",
    [
        ({"duration_s": 10}, ["duration_s"]),
        ({"sweep": None}, ["duration_s", "load.clients"]),
        ({"load": {"model": "closed", "clients": 3}}, ["load.clients"]),
        ({"sweep": {"steps": [1, 2.5], "step_s": 3}}, ["sweep.steps[1]"]),
        ({"sweep": {"steps": [1], "step_s": 3, "warmup_s": 2}}, ["sweep.step_s"]),
        ({"sweep": {"steps": [1], "step_s": 3, "servers": [1, 4]}}, ["sweep.servers[1]"]),
        ({"sweep": {"steps": [], "step_s": 0}}, ["sweep.step_s", "sweep.steps"]),
        ({"budget": {"requests": 10}}, ["budget"]),
        ({"stop": {"latency": {"above_ms": 0, "for_s": 1}}}, ["stop.latency.above_ms"]),
        ({"stop": {"error_pct": {"above": 5}}}, ["stop.error_pct"]),
        ({"sweep": {"steps": [[10, 2]], "step_s": 3}}, ["sweep.steps[0]"]),  # pairs are for the users model
        ({"load": {"model": "users"}, "sweep": {"steps": [[10, 2], 20], "step_s": 3}}, ["load.spawn_rate"]),
        ({"load": {"model": "users"}, "sweep": {"steps": [[10, 2, 3]], "step_s": 3}}, ["sweep.steps[0]"]),
    ],
)
def test_problems_have_paths(changes, paths):
    doc = {**BASE, **changes}
    doc = {k: v for k, v in doc.items() if v is not None}
    with pytest.raises(PlanError) as err:
        parse_plan(yaml.safe_dump(doc))
    assert sorted(p.path for p in err.value.problems) == sorted(paths)


def _row(target, requests, ok, latency_ms, opened=0, active=0, users=0):
    row = StatsRow(
        target,
        "/",
        requests=requests,
        bytes_in=100 * requests,
        connections_opened=opened,
        active_connections=active,
        users=users,
        histogram=Histogram.of([int(latency_ms * 1000)], count=requests),
    )
    row.status[1] = ok
    row.status[4] = requests - ok
    return row


def test_a_step_is_measured_without_warm_up_and_final_interval():
    plan = plan_of(sweep={"steps": [4], "step_s": 4, "warmup_s": 1}, load={"model": "closed"})
    spec = expand(plan)[0]
    step = window("s1", start_ms=10_000, seconds=4, warmup_ms=1000, cooldown_ms=1000)
    meter = StepMeter()
    for i, n in enumerate([1000, 100, 200, 5000]):  # warm-up, two measured, final (drain)
        meter.on_interval(
            interval(
                step,
                10_000 + 1000 * i,
                a1=[
                    _row("http://127.0.0.2:80", n, n - 10, 2.0, opened=5, active=8, users=n // 10),
                    _row("http://127.0.0.3:80", n, n, 4.0, active=2, users=3),
                ],
            )
        )
    result = meter.result(spec, step, StepState.FINISHED)
    assert (result.requests, result.measured_s, result.achieved_rps, result.intervals) == (600, 2.0, 300.0, 2)
    assert result.start_ms == 11_000
    assert result.ok_rps == (600 - 20) / 2 and result.error_pct == pytest.approx(100 * 20 / 600)
    assert result.per_server_rps == {"http://127.0.0.2:80": 150.0, "http://127.0.0.3:80": 150.0}
    assert (result.new_conns_per_s, result.concurrent_conns) == (5.0, 10.0)
    # Users at the two measured intervals' ends: 10 + 3 and 20 + 3 (not the warm-up's 103).
    assert (result.concurrent_users, result.peak_users) == (18.0, 23)
    assert result.p50_ms == pytest.approx(2.0, rel=0.01) and result.p99_ms == pytest.approx(4.0, rel=0.01)

    rows = list(csv.DictReader(io.StringIO(steps_csv([result], [t.url for t in plan.targets]))))
    assert rows[0]["step"] == "s1" and rows[0]["state"] == "finished" and rows[0]["generator_bound"] == "false"
    assert (rows[0]["concurrent_users"], rows[0]["peak_users"]) == ("18.0", "23")
    assert rows[0]["rps http://127.0.0.2:80"] == "150.0" and rows[0]["rps http://127.0.0.4:80"] == ""
    # Each target side by side: the slow one (4 ms, no errors) and the failing one (2 ms, 10 of 150/s).
    fast, slow = result.targets
    assert (fast.url, fast.achieved_rps, fast.ok_rps, fast.error_pct) == (
        "http://127.0.0.2:80",
        150.0,
        140.0,
        pytest.approx(100 * 20 / 300),
    )
    assert (slow.error_pct, slow.mean_ms, slow.p99_ms) == (
        0.0,
        pytest.approx(4.0, rel=0.01),
        pytest.approx(4.0, rel=0.01),
    )
    assert fast.mean_ms == pytest.approx(2.0, rel=0.01)
    assert (
        rows[0]["p99_ms http://127.0.0.3:80"] == str(round(slow.p99_ms, 3))
        and rows[0]["mean_ms http://127.0.0.4:80"] == ""
    )


def test_a_step_stopped_early_is_measured_up_to_when_it_stopped():
    spec = expand(plan_of(sweep={"steps": [4], "step_s": 10}))[0]
    step = window("s1", start_ms=10_000, seconds=10, cooldown_ms=1000).halted(12_500)
    meter = StepMeter()
    for i in range(3):
        meter.on_interval(interval(step, 10_000 + 1000 * i, a1=[_row("http://127.0.0.2:80", 100, 100, 1.0)]))
    result = meter.result(spec, step, StepState.STOPPED)
    assert (result.intervals, result.measured_s, result.requests) == (3, 2.5, 300)


def test_a_steps_phases_are_merged_over_its_measured_intervals_and_written_to_steps_csv():
    plan = plan_of(sweep={"steps": [4], "step_s": 3}, load={"model": "closed"})
    spec = expand(plan)[0]
    step = window("s1", start_ms=10_000, seconds=3, cooldown_ms=1000)
    meter = StepMeter()
    for i, waiting_us in enumerate([1000, 3000, 99_000]):  # two measured intervals, the final one left out
        row = _row("http://127.0.0.2:80", 100, 100, 5.0)
        row.phases = Phases(
            connect=Phase(10, 10 * 2000, 2500),  # 10 new connections of 2 ms each
            waiting=Phase(100, 100 * waiting_us, waiting_us),
            receiving=Phase(100, 100 * 500, 600),
            waiting_histogram=Histogram.of([waiting_us], count=100),
        )
        meter.on_interval(interval(step, 10_000 + 1000 * i, a1=[row]))
    result = meter.result(spec, step, StepState.FINISHED)
    phases = result.phases
    assert phases is not None and phases.responses == 200
    assert phases.connect.per_response_ms == pytest.approx(20 * 2 / 200)  # spread over every response
    assert (phases.connect.mean_ms, phases.connect.count) == (pytest.approx(2.0), 20)
    assert phases.waiting.per_response_ms == pytest.approx(2.0) and phases.waiting.max_ms == pytest.approx(3.0)
    assert phases.other_ms == pytest.approx(5.0 - 0.2 - 2.0 - 0.5, abs=0.01)
    assert result.figures().phases == phases  # the step point's

    without = StepMeter()
    without.on_interval(interval(step, 10_000, a1=[_row("http://127.0.0.2:80", 100, 100, 5.0)]))
    gatling_like = without.result(spec, step, StepState.FINISHED)
    assert gatling_like.phases is None

    rows = list(csv.DictReader(io.StringIO(steps_csv([result, gatling_like], [t.url for t in plan.targets]))))
    assert float(rows[0]["connect_per_response_ms"]) == pytest.approx(0.2)
    assert float(rows[0]["waiting_per_response_ms"]) == pytest.approx(2.0)
    assert float(rows[0]["receiving_per_response_ms"]) == pytest.approx(0.5) and rows[0]["tls_per_response_ms"] == "0.0"
    parts = sum(float(rows[0][f"{p}_per_response_ms"]) for p in ("connect", "tls", "waiting", "receiving"))
    assert parts + float(rows[0]["other_ms"]) == pytest.approx(float(rows[0]["mean_ms"]), abs=0.002)
    assert 1.0 <= float(rows[0]["waiting_p50_ms"]) <= float(rows[0]["waiting_p99_ms"]) <= 3.01
    assert all(rows[1][c] == "" for c in ("waiting_per_response_ms", "other_ms", "waiting_p99_ms"))
