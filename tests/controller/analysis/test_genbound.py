"""Generator health: each interval's verdict from heartbeats and rows, and the step's."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.genbound import GeneratorHealth, StepValidity, is_loopback, step_validity
from loadfleet.controller.model.events import EventKind
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.verdict import Reason, Signal, Validity
from loadfleet.controller.stream.contract import StepEnd
from loadfleet.v1 import stats_pb2
from support.streamdata import interval, row, window

STEP = window("s1", start_ms=10_000, seconds=10)


def judge_with(
    health: Health | None, *rows_of_a1, engines: int = 1, at_ms: int = 13_000, heartbeat_ms: int = 1000, step=STEP
) -> Validity:
    gh = GeneratorHealth(heartbeat_ms)
    if health is not None:
        gh.on_health(step, "a1", health, at_ms + 1000, engines)  # describes [at, at + 1 s)
    return gh.judge(interval(step, at_ms, a1=list(rows_of_a1) or [row(100)])).validity


@pytest.mark.parametrize(
    "health, expected",
    [
        (Health(cpu_pct=40, busiest_engine_cpu_pct=50, busiest_engine_wait_pct=1), Validity.VALID),
        # A busy neighbour alone: suspect, never invalid (the engine's wait says whether it suffered).
        (Health(cpu_pct=99, busiest_engine_cpu_pct=30, busiest_engine_wait_pct=2), Validity.SUSPECT),
        (Health(cpu_pct=99, busiest_engine_cpu_pct=95, busiest_engine_wait_pct=2), Validity.INVALID),
        (Health(cpu_pct=60, busiest_engine_cpu_pct=30, busiest_engine_wait_pct=12), Validity.SUSPECT),
        (Health(cpu_pct=60, busiest_engine_cpu_pct=30, busiest_engine_wait_pct=40), Validity.INVALID),
        (Health(cpu_pct=60, busiest_engine_cpu_pct=80, busiest_engine_wait_pct=15), Validity.INVALID),
        (Health(loop_lag_ms=300), Validity.SUSPECT),
        (Health(loop_lag_ms=1500), Validity.INVALID),
        (Health(engine_fds=950, engine_fd_limit=1024), Validity.SUSPECT),
        (Health(engine_fds=500, engine_fd_limit=1024), Validity.VALID),
        (Health(local_ports_used=25_000, local_port_range=28_232), Validity.SUSPECT),
        # An older agent (no busiest engine, no wait): its engines' sum against their cores.
        (Health(engine_cpu_pct=190), Validity.INVALID),
        (Health(engine_cpu_pct=120), Validity.VALID),
    ],
)
def test_a_heartbeat_judges_the_interval_it_describes(health, expected):
    assert judge_with(health, engines=2) is expected


def _local(kind: int, n: int, requests: int = 100):
    r = row(requests, failed=n)
    r.errors[kind] = n
    return r


def _open_row(scheduled: int, late: int, lag_ms: float, *, not_sent: int = 0, active: int = 10):
    r = row(scheduled, active=active)
    r.scheduled, r.sent_late, r.max_send_lag_us, r.not_sent = scheduled, late, int(lag_ms * 1000), not_sent
    return r


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([_local(stats_pb2.ERROR_KIND_LOCAL_FDS, 50)], Validity.INVALID),
        ([_local(stats_pb2.ERROR_KIND_LOCAL_PORTS, 3)], Validity.INVALID),
        ([_local(stats_pb2.ERROR_KIND_LOCAL_PORTS, 1, requests=1000)], Validity.SUSPECT),
        ([_local(stats_pb2.ERROR_KIND_CONNECT_REFUSED, 50)], Validity.VALID),  # the target's doing
        ([_open_row(1000, 300, 250)], Validity.INVALID),
        ([_open_row(1000, 20, 30)], Validity.SUSPECT),
        ([_open_row(1000, 5, 500)], Validity.VALID),
        # Late because the targets held every connection: their limit, not the generator's.
        ([_open_row(1000, 300, 250, not_sent=10)], Validity.VALID),
        ([_open_row(1000, 300, 250, active=1024)], Validity.VALID),
    ],
)
def test_an_interval_s_own_rows_judge_it(rows, expected):
    assert judge_with(Health(), *rows) is expected


def test_a_missing_heartbeat_is_stood_in_for_by_the_previous_one_only_briefly():
    gh = GeneratorHealth(1000)
    gh.on_health(STEP, "a1", Health(busiest_engine_cpu_pct=99, busiest_engine_wait_pct=0), 12_500, 1)  # interval 12 s
    assert gh.judge(interval(STEP, 13_000, a1=[row(10)])).validity is Validity.INVALID
    assert gh.judge(interval(STEP, 16_000, a1=[row(10)])).validity is Validity.VALID


def test_reasons_name_the_agent_and_each_agent_keeps_its_own():
    gh = GeneratorHealth(1000)
    gh.on_health(STEP, "a1", Health(busiest_engine_cpu_pct=97, busiest_engine_wait_pct=0), 14_000, 1)
    gh.on_health(STEP, "a2", Health(cpu_pct=20), 14_000, 1)
    verdict = gh.judge(interval(STEP, 13_000, a1=[row(10)], a2=[row(10)]))
    assert verdict.validity is Validity.INVALID
    assert verdict.describe() == "invalid: a1: engine at 97 % of its core"
    assert verdict.for_agent("a2").validity is Validity.VALID


@pytest.mark.parametrize(
    "intervals, invalid, suspect, expected",
    [
        (10, 0, 0, Validity.VALID),
        (10, 1, 0, Validity.INVALID),
        (30, 1, 0, Validity.SUSPECT),  # one bad second of 30
        (30, 3, 0, Validity.INVALID),
        (30, 0, 2, Validity.VALID),
        (30, 0, 3, Validity.SUSPECT),
    ],
)
def test_a_step_s_verdict_from_its_intervals(intervals, invalid, suspect, expected):
    assert step_validity(intervals, invalid, suspect) is expected


def test_a_step_counts_only_its_measured_intervals_and_forgets_the_previous_step():
    gh = GeneratorHealth(1000)
    warm = window("s1", start_ms=10_000, seconds=5, warmup_ms=2000)
    for at in range(10_000, 15_000, 1000):
        gh.on_health(
            warm,
            "a1",
            Health(busiest_engine_cpu_pct=99 if at < 12_000 else 10, busiest_engine_wait_pct=0),
            at + 1000,
            1,
        )
        gh.judge(interval(warm, at, a1=[row(10)]))
    assert gh.verdict("s1", 1, 0).validity is Validity.VALID  # saturated only while warming up
    nxt = window("s2", start_ms=15_000, seconds=3)
    gh.on_health(nxt, "a1", Health(busiest_engine_cpu_pct=99, busiest_engine_wait_pct=0), 16_000, 1)
    gh.judge(interval(nxt, 15_000, a1=[row(10)]))
    found = gh.verdict("s2", 1, 0)
    assert (found.validity, found.intervals, found.invalid_intervals) == (Validity.INVALID, 1, 1)
    assert gh.verdict("s1", 1, 0).intervals == 0


def test_generator_advice_says_when_more_agents_on_this_host_cannot_help():
    reason = Reason(Signal.ENGINE_CPU, Validity.INVALID, "a1", "engine at 99 % of its core")
    bound = StepValidity(Validity.INVALID, 3, 2, 0, (reason,), add_agents=1)
    assert "a1: engine at 99 % of its core" in bound.describe("s1")
    assert bound.describe("s1").endswith("Add about 1 more agent(s) and run it again")
    assert "Add about 1 more agent(s) on other hosts" in bound.describe("s1", one_host=True)
    assert [
        is_loopback(u)
        for u in (
            "http://127.0.0.2:8080",
            "http://[::1]/",
            "http://localhost:80",
            "http://10.0.0.7:8080",
            "http://web1:80",
        )
    ] == [True, True, True, False, False]


def test_a_gatling_jvm_over_several_cores_is_judged_per_core():
    busy_jvm = Health(busiest_engine_cpu_pct=180, busiest_engine_wait_pct=10)  # 45 % and 2.5 % of each of 4 cores
    gh = GeneratorHealth(1000, multi_core_driver=True)
    gh.on_health(STEP, "a1", busy_jvm, 14_000, 4)
    assert gh.judge(interval(STEP, 13_000, a1=[row(10)])).validity is Validity.VALID
    assert judge_with(busy_jvm, engines=4) is Validity.INVALID  # one engine per core: that one is saturated


def test_a_thousand_busy_agents_make_a_bounded_reasons_text_and_each_keeps_its_own():
    gh = GeneratorHealth(1000)
    agents = {f"a{i}": [row(10)] for i in range(1000)}
    for name in agents:
        gh.on_health(STEP, name, Health(cpu_pct=95), 14_000, 1)
    gh.on_health(STEP, "a7", Health(cpu_pct=95, busiest_engine_cpu_pct=99, busiest_engine_wait_pct=0), 14_000, 1)
    verdict = gh.judge(interval(STEP, 13_000, **agents))
    text = verdict.reasons_text()
    assert text.startswith("a7: engine at 99 % of its core") and text.endswith("; and 991 more") and len(text) < 1000
    own = verdict.by_agent()
    assert own["a7"].validity is Validity.INVALID and own["a8"].validity is Validity.SUSPECT and len(own) == 1000


# ---- A target that failed: the target's doing, not the generators'.

BUSY = Health(busiest_engine_cpu_pct=99, busiest_engine_wait_pct=0)
DEAD = "http://127.0.0.2:18081"


def _refused(n: int, ok: int = 0, target: str = DEAD):
    r = row(n, target=target, failed=n - ok)
    r.status[4] = 0  # the failures are refused connects, not 5xx responses
    r.errors[stats_pb2.ERROR_KIND_CONNECT_REFUSED] = n - ok
    return r


def _run_step(gh: GeneratorHealth, step, rows_at) -> None:
    """Judges each interval of `step` with a busy engine's heartbeat and `rows_at(start_ms)`."""
    for at in range(step.load_start_ms, step.load_end_ms, 1000):
        gh.on_health(step, "a1", BUSY, at + 1000, 1)
        gh.judge(interval(step, at, a1=rows_at(at)))


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([_refused(50_000)], Validity.SUSPECT),  # busy engines while only failing: not generator-bound
        ([_refused(50_000, ok=499)], Validity.SUSPECT),
        ([_refused(50_000, ok=500)], Validity.INVALID),  # 1 % ok: the engine's saturation counts
        ([_refused(50_000), row(50_000, target="http://up:1")], Validity.INVALID),  # one target of two
    ],
)
def test_an_interval_whose_target_failed_is_not_judged_on_its_generators(rows, expected):
    verdict_ = GeneratorHealth(1000)
    verdict_.on_health(STEP, "a1", BUSY, 14_000, 1)
    found = verdict_.judge(interval(STEP, 13_000, a1=rows))
    assert found.validity is expected
    if expected is Validity.SUSPECT:
        assert [r.signal for r in found.reasons] == [Signal.TARGET_FAILED]
        assert found.describe().startswith("suspect: the target failed: ")
        assert "connects refused by 127.0.0.2:18081" in found.describe()


def test_a_step_whose_target_failed_names_its_failure_and_advises_no_agents():
    events = []
    gh = GeneratorHealth(1000, emit=events.append)
    _run_step(gh, STEP, lambda at: [_refused(203_791)])
    found = gh.verdict("s1", 1, 0)
    assert (found.validity, found.bound, found.intervals, found.invalid_intervals) == (Validity.SUSPECT, False, 10, 0)
    assert found.target_failure == (
        "the target failed: 2,037,910 connects refused by 127.0.0.2:18081 (0 of 2,037,910 requests ok)"
    )
    assert found.reasons_text() == found.target_failure
    text = found.describe("s1", one_host=True)
    assert text.startswith("step s1: the target failed: 2,037,910 connects refused by 127.0.0.2:18081")
    assert "agent" not in text.lower() and found.add_agents == 0
    gh.on_step_end(StepEnd(STEP, None))  # type: ignore[arg-type]  # the result is not read
    assert [(e.kind, e.text) for e in events] == [(EventKind.TARGET_FAILED, text)]


def test_a_step_whose_target_failed_for_a_while_counts_those_intervals_and_stays_generator_bound():
    events = []
    gh = GeneratorHealth(1000, emit=events.append)
    _run_step(gh, STEP, lambda at: [_refused(1000)] if at < 13_000 else [row(1000, target=DEAD)])
    found = gh.verdict("s1", 1, 0)
    assert (found.validity, found.invalid_intervals, found.suspect_intervals) == (Validity.INVALID, 7, 3)
    assert not found.target_failure and "Add about 1 more agent(s)" in found.describe("s1")
    assert "the target failed: 3,000 connects refused by 127.0.0.2:18081 (in 3 of 10 intervals)" in found.reasons_text()
    gh.on_step_end(StepEnd(STEP, None))  # type: ignore[arg-type]
    assert events == []


def test_a_generator_bound_step_keeps_its_advice_and_publishes_no_target_failure():
    events = []
    gh = GeneratorHealth(1000, emit=events.append)
    _run_step(gh, STEP, lambda at: [row(1000)])
    found = gh.verdict("s1", 2, 0)
    assert found.bound and "Add about 1 more agent(s)" in found.describe("s1")
    gh.on_step_end(StepEnd(STEP, None))  # type: ignore[arg-type]
    assert events == []


def _lagging(lag_sum_us: int, *, active: int = 10):
    """1000 requests of 0.94 ms each, sent with `lag_sum_us` of lag in all, none 1 ms late."""
    r = row(1000, latencies=[940] * 1000, active=active)
    r.scheduled, r.send_lag_sum_us = 1000, lag_sum_us
    return r


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([_lagging(790_000)], Validity.INVALID),  # issue 33: 0.79 of a 0.94 ms mean
        ([_lagging(60_000)], Validity.SUSPECT),
        ([_lagging(20_000)], Validity.VALID),
        ([_lagging(790_000, active=1024)], Validity.VALID),  # every connection held: the targets' lag
    ],
)
def test_an_open_model_interval_whose_send_lag_is_much_of_its_latency_measures_the_generator(rows, expected):
    assert judge_with(Health(), *rows) is expected


def test_each_agent_s_send_lag_is_weighed_against_its_own_latency():
    gh = GeneratorHealth(1000)
    for agent in ("a1", "a2"):
        gh.on_health(STEP, agent, Health(), 14_000, 1)
    verdict = gh.judge(interval(STEP, 13_000, a1=[_lagging(790_000)], a2=[_lagging(0)]))
    assert verdict.describe() == "invalid: a1: send lag 0.79 ms is 84 % of the 0.94 ms mean latency"
