"""Naming a step's bottleneck from its monitored hosts: a process at its CPU cap, a connection
limit, a balancer's queue, a host with every core busy — and no claim without a monitor or
below the bounds. The knee's note (and so the analysis notes) says which."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadfleet.controller.analysis.bottleneck import QUEUE_MIN_REQUESTS, SATURATED_SHARE, find_bottleneck
from loadfleet.controller.analysis.sweep import analyze, knee_search
from loadfleet.controller.model.hostsamples import Bottleneck, HostLoad, ProcessLoad, Resource
from loadfleet.controller.model.load import LoadModel
from support.stepresults import step


def host(name: str = "lb", *, cpu: float = 40.0, cores: int = 2, processes=(), gauges=None) -> HostLoad:
    return HostLoad(
        host=name,
        role="",
        targets=(),
        samples=5,
        cpu_pct=cpu,
        max_cpu_pct=cpu,
        process_cpu_pct=sum(p.cpu_pct for p in processes),
        mem_used_pct=10.0,
        net_rx_mb_per_s=1.0,
        net_tx_mb_per_s=1.0,
        tcp_established=10,
        cores=cores,
        processes=tuple(processes),
        gauges=gauges or {},
    )


HAPROXY_AT_CAP = host(processes=[ProcessLoad("haproxy", 99.0, 100.0)])


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        # Happy: each resource, as its sentence says it.
        ([HAPROXY_AT_CAP], "haproxy at 99 % of its 1 CPU on lb"),
        ([host("web1", processes=[ProcessLoad("nginx", 48.0, 50.0)])], "nginx at 96 % of its 0.5 CPU on web1"),
        # No cap reported: the host's cores are the cap (hosts.py makes it so).
        ([host("web1", processes=[ProcessLoad("nginx", 196.0, 200.0)])], "nginx at 98 % of its 2 CPUs on web1"),
        (
            [host(gauges={"haproxy.lb.FRONTEND.scur": 3990.0, "haproxy.lb.FRONTEND.slim": 4000.0})],
            "HAProxy frontend lb at 3990 of its 4000 connections on lb",
        ),
        (
            [host(gauges={"haproxy.group.BACKEND.qcur": 3.2})],
            "HAProxy backend group queueing 3.2 requests on average on lb (no backend free)",
        ),
        ([host("web1", cpu=97.0, cores=2)], "host web1 at 97 % of its 2 CPUs"),
        # A process at its cap is named before the busy host it runs on.
        ([host(cpu=99.0, processes=[ProcessLoad("haproxy", 99.0, 100.0)])], "haproxy at 99 % of its 1 CPU on lb"),
        # Of two at their caps, the one closer to it.
        (
            [host("web1", processes=[ProcessLoad("nginx", 96.0, 100.0)]), HAPROXY_AT_CAP],
            "haproxy at 99 % of its 1 CPU on lb",
        ),
        # Sad: no monitor, or nothing at its bound.
        ([], None),
        ([host(processes=[ProcessLoad("haproxy", 90.0, 100.0)])], None),  # 90 %: busy, not saturated
        ([host(cpu=90.0)], None),
        ([host(gauges={"haproxy.lb.FRONTEND.scur": 3000.0, "haproxy.lb.FRONTEND.slim": 4000.0})], None),
        ([host(gauges={"haproxy.lb.FRONTEND.scur": 10.0, "haproxy.lb.FRONTEND.slim": 0.0})], None),  # no limit
        ([host(gauges={"haproxy.group.BACKEND.qcur": 0.2})], None),  # a queue in a sample or two
        ([host(gauges={"haproxy.group.web1.qcur": 5.0})], None),  # a server's queue: its backend's says it
        ([host(processes=[ProcessLoad("haproxy", 0.0, 0.0)])], None),  # no cap known, nothing used
    ],
)
def test_the_saturated_resource_is_named(hosts, expected):
    found = find_bottleneck(hosts)
    assert (found.describe() if found else None) == expected


def test_the_bounds_hold_at_their_values():
    # SATURATED_SHARE of the cap is saturated; just under it is not. QUEUE_MIN_REQUESTS counts.
    at = SATURATED_SHARE * 100
    assert find_bottleneck([host(processes=[ProcessLoad("p", at, 100.0)])]) is not None
    assert find_bottleneck([host(processes=[ProcessLoad("p", at - 0.1, 100.0)])]) is None
    assert find_bottleneck([host(cpu=at)]) is not None and find_bottleneck([host(cpu=at - 0.1)]) is None
    assert find_bottleneck([host(gauges={"haproxy.g.BACKEND.qcur": QUEUE_MIN_REQUESTS})]) is not None
    assert find_bottleneck([host(gauges={"haproxy.g.BACKEND.qcur": QUEUE_MIN_REQUESTS - 0.01})]) is None


def test_a_bottleneck_is_typed():
    found = find_bottleneck([HAPROXY_AT_CAP])
    assert found == Bottleneck(Resource.PROCESS_CPU, "lb", "haproxy", 99.0, 100.0)
    assert found.share_pct == pytest.approx(99.0)


def with_hosts(result, *hosts):
    return replace(result, hosts=hosts, bottleneck=find_bottleneck(hosts))


SWEEP = [
    step("s1", 10, 1000, 5),
    step("s2", 20, 2000, 5.5),
    step("s3", 40, 2100, 40),  # the knee
    step("s4", 80, 2100, 90),
]


@pytest.mark.parametrize(
    ("saturated_at", "note"),
    [
        (2, "; saturated at the knee: haproxy at 99 % of its 1 CPU on lb"),
        (3, "; saturated at step s4: haproxy at 99 % of its 1 CPU on lb"),  # the level after the knee
        (None, ""),  # no monitor saw one: no claim
    ],
)
def test_the_knee_note_names_what_saturated(saturated_at, note):
    results = [with_hosts(r, HAPROXY_AT_CAP if i == saturated_at else host()) for i, r in enumerate(SWEEP)]
    found = knee_search(results, 1)
    assert found.knee.name == "s3"
    assert found.note.endswith("(repeat the sweep for one)" + note)
    analysis = analyze(results, LoadModel.CLOSED, server_sweep=False)
    assert analysis.notes[0] == "knee: " + found.note


def test_a_resource_saturated_before_the_knee_is_not_its_cause_and_without_a_knee_the_first_is_named():
    early = [with_hosts(r, HAPROXY_AT_CAP if i == 0 else host()) for i, r in enumerate(SWEEP)]
    assert "saturated" not in knee_search(early, 1).note
    flat = [with_hosts(step(f"s{i}", 10 * i, 1000 * i, 5), HAPROXY_AT_CAP if i >= 2 else host()) for i in (1, 2, 3)]
    found = knee_search(flat, 1)
    assert found.knee is None and "saturated at step s2: haproxy" in found.note


def test_the_step_line_says_what_saturated():
    result = with_hosts(SWEEP[2], HAPROXY_AT_CAP)
    assert result.describe().endswith(", saturated: haproxy at 99 % of its 1 CPU on lb")
    assert "saturated" not in SWEEP[2].describe()
