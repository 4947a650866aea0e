"""Monitored hosts: which samples belong to a step's window, their means, counter rates, the
CSV rows; what is kept does not grow with the number of samples."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from loadfleet.controller.analysis.hosts import (
    MAX_SAMPLE_BYTES,
    HostRecorder,
    HostSampleGate,
    HostWindow,
    counter_csv_rows,
    counter_rates,
    host_csv_rows,
    is_gauge,
)
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo, ProcessLoad, ProcessSample
from support.streamdata import window

WEB = MonitorInfo(targets=("http://127.0.0.2:8080",), processes=("nginx",))


def sample(at_ms: int, cpu: float, nginx: float = 0.0) -> HostSample:
    return HostSample(
        at_ms=at_ms,
        cores=2,
        cpu_pct=cpu,
        mem_used_pct=10.0,
        net_rx_bytes_per_s=1e6,
        net_tx_bytes_per_s=2e6,
        tcp_established=4,
        processes=(ProcessSample("nginx", 2, nginx, 30.0),),
    )


def test_a_window_holds_the_samples_whose_period_is_mostly_inside_it():
    hosts = HostWindow(10_000, period_ms=1000)
    # A heartbeat at t covers (t - 1 s, t]: the one at 10.4 s is mostly before 10 s.
    for at_ms, cpu in ((10_400, 90.0), (10_600, 10.0), (11_600, 30.0), (12_600, 70.0)):
        hosts.add("web1", WEB, sample(at_ms, cpu, nginx=cpu / 2), end_ms=12_000)
    [load] = hosts.loads()
    assert load.samples == 2
    assert load.cpu_pct == pytest.approx(20.0) and load.max_cpu_pct == 30.0
    assert load.process_cpu_pct == pytest.approx(10.0)
    assert (load.net_rx_mb_per_s, load.net_tx_mb_per_s) == (1.0, 2.0)
    assert load.targets == WEB.targets
    assert HostWindow(20_000, period_ms=1000).loads() == ()


def test_each_step_gets_its_measured_window_and_the_run_all_of_its_load():
    hosts = HostRecorder(period_ms=1000)
    s1 = window("s1", start_ms=10_000, seconds=3, warmup_ms=1000, cooldown_ms=1000)
    s2 = window("s2", start_ms=14_000, seconds=2)
    for at_ms, cpu in ((10_600, 10.0), (11_600, 20.0), (12_600, 90.0)):
        hosts.on_host(s1, "web1", WEB, sample(at_ms, cpu))
    for at_ms, cpu in ((14_600, 40.0), (15_600, 60.0), (16_600, 99.0)):  # the last is after its load
        hosts.on_host(s2, "web1", WEB, sample(at_ms, cpu))
    assert [load.cpu_pct for load in hosts.step_loads("s1")] == [20.0]
    assert [load.cpu_pct for load in hosts.step_loads("s2")] == [50.0]
    assert [load.samples for load in hosts.run_loads()] == [5]


def test_csv_rows_have_a_row_per_sample_and_process_group():
    rows = [
        *host_csv_rows("web1", WEB, sample(1000, 50.0, nginx=80.0)),
        *host_csv_rows("nfs", MonitorInfo(role="nfs"), HostSample(1000, 2, 20.0, 5.0, 0.0, 0.0, 1)),
    ]
    assert [(r[1], r[2], r[3], r[10], r[12]) for r in rows] == [
        ("web1", "", "http://127.0.0.2:8080", "nginx", 80.0),
        ("nfs", "nfs", "", "", 0.0),
    ]


def counted(at_ms: int, **counters: float) -> HostSample:
    return HostSample(at_ms, 2, 0.0, 0.0, 0.0, 0.0, 0, counters={k.replace("__", "."): v for k, v in counters.items()})


@pytest.mark.parametrize(
    "samples, rates",
    [
        # Steady: from the first reading in the window to the last (the one before the window,
        # taken while no load ran yet, would dilute the rate).
        ([counted(500, req=0), counted(1000, req=0), counted(2000, req=100), counted(3000, req=200)], {"req": 100.0}),
        # One reading in the window: from the last one before it.
        ([counted(500, req=10), counted(2500, req=110)], {"req": 50.0}),
        # The server restarted between 2 s and 3 s: that span is left out, time and all.
        ([counted(1000, req=0), counted(2000, req=100), counted(3000, req=20), counted(4000, req=120)], {"req": 100.0}),
        # A reading a sample lacks (the server did not answer) is skipped: the span runs over it.
        ([counted(1000, req=0), counted(2000), counted(3000, req=300)], {"req": 150.0}),
        # Readings after the window do not count; nothing moves: rate 0.
        ([counted(1000, req=5), counted(2000, req=5), counted(9000, req=500)], {"req": 0.0}),
        # Fewer than two readings, or only a restart: no rate at all.
        ([counted(1000, req=5)], {}),
        ([counted(1000, req=50), counted(2000, req=5)], {}),
        # Counters are independent: one server's gap does not touch another's.
        ([counted(1000, a=0, b=0), counted(2000, a=10), counted(3000, a=20, b=40)], {"a": 10.0, "b": 20.0}),
    ],
)
def test_counter_rates_over_a_window(samples, rates):
    assert counter_rates(samples, 1000, 4000) == pytest.approx(rates)


def test_a_hosts_load_carries_its_counter_rates_and_counter_rows_every_reading():
    hosts = HostWindow(500, period_ms=1000)
    first = counted(1000, haproxy__group__web1__req_tot=0.0)
    second = counted(2000, haproxy__group__web1__req_tot=2**40)
    for s in (first, second):
        hosts.add("lb", MonitorInfo(role="lb"), s, end_ms=2500)
    hosts.add("web1", WEB, sample(2000, 10.0), end_ms=2500)
    lb, web1 = hosts.loads()
    assert lb.counter_rates == {"haproxy.group.web1.req_tot": 2**40} and web1.counter_rates == {}
    assert counter_csv_rows("lb", first) + counter_csv_rows("lb", second) == [
        [1000, "lb", "haproxy.group.web1.req_tot", 0],
        [2000, "lb", "haproxy.group.web1.req_tot", 2**40],
    ]  # whole numbers, every digit


def test_a_monitor_flooding_heartbeats_gets_one_sample_a_period_and_one_warning(caplog):
    now = [0.0]
    gate = HostSampleGate(1.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING):
        taken = []
        for i in range(100):  # ten a second for ten seconds
            now[0] = i / 10
            taken.append(gate.admit("rogue", 500))
    assert sum(taken) == 3 + 9, "its burst, then one a second"
    assert gate.dropped("rogue") == 100 - 12
    assert len(caplog.records) == 1 and "rogue: 1 monitored-host sample(s) dropped" in caplog.text


@pytest.mark.parametrize("jitter_s", [0.0, 0.3, -0.3])
def test_a_monitor_beating_on_time_loses_nothing_late_or_early_beats_included(jitter_s):
    now = [0.0]
    gate = HostSampleGate(1.0, clock=lambda: now[0])
    taken = []
    for k in range(1, 60):
        now[0] = k + (jitter_s if k % 2 else 0.0)  # every other beat late (or early)
        taken.append(gate.admit("web1", 2000))
    now[0] = 70.0  # a stall of ten seconds: the agent's outbox sends its two kept beats and the next
    taken += [gate.admit("web1", 2000) for _ in range(3)]
    assert all(taken) and gate.dropped("web1") == 0


def test_a_sample_too_large_is_dropped_and_other_agents_are_not_held_back():
    now = [0.0]
    gate = HostSampleGate(1.0, clock=lambda: now[0])
    assert not gate.admit("big", MAX_SAMPLE_BYTES + 1)
    assert gate.admit("big", MAX_SAMPLE_BYTES)
    assert [gate.admit("rogue", 10) for _ in range(5)] == [True] * 3 + [False] * 2
    assert gate.admit("web1", 10), "another agent has its own allowance"


def test_a_hosts_load_has_each_process_groups_mean_and_cap():
    hosts = HostWindow(0, period_ms=1000)
    capped = ProcessSample("haproxy", 1, 0.0, 10.0, cap_pct=100.0)
    for at_ms, cpu in ((1000, 90.0), (2000, 100.0)):
        s = sample(at_ms, 50.0, nginx=cpu)  # cores=2, nginx with no cap reported
        hosts.add("web1", WEB, replace(s, processes=(*s.processes, replace(capped, cpu_pct=cpu))), end_ms=3000)
    [load] = hosts.loads()
    assert load.cores == 2
    assert load.processes == (ProcessLoad("nginx", 95.0, 200.0), ProcessLoad("haproxy", 95.0, 100.0))


def test_haproxys_gauges_get_means_not_rates():
    hosts = HostWindow(500, period_ms=1000)
    for at_ms, queued in ((1000, 0.0), (2000, 4.0), (3000, 2.0)):
        hosts.add(
            "lb",
            MonitorInfo(role="lb"),
            counted(at_ms, haproxy__group__BACKEND__qcur=queued, haproxy__group__BACKEND__req_tot=at_ms / 10),
            end_ms=3500,
        )
    [lb] = hosts.loads()
    assert lb.gauges == {"haproxy.group.BACKEND.qcur": 2.0}
    assert lb.counter_rates == {"haproxy.group.BACKEND.req_tot": 100.0}
    names = ("haproxy.lb.FRONTEND.scur", "haproxy.g.w.slim", "haproxy.g.w.stot", "varnish.qcur")
    assert [is_gauge(n) for n in names] == [True, True, False, False]
