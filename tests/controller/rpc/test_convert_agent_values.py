"""An agent's Hello, heartbeats and notices, checked where they enter (rpc/convert.py,
rpc/bounds.py): hostile values from the red-team audit of 2026-11-27 (issue 28: B4, B6, B8,
the twelfth) and ordinary ones next to them. And what goes out to operators cannot fail on
a figure that grew too large."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest

from loadfleet.controller.fleet.jobs import JobState
from loadfleet.controller.model.figures import figures_of
from loadfleet.controller.model.runstate import RunState
from loadfleet.controller.output.watchers import IntervalUpdate
from loadfleet.controller.rpc import bounds
from loadfleet.controller.rpc.convert import (
    BadHello,
    engine_failure_from_proto,
    health_from_proto,
    host_from_proto,
    identity_from_hello,
    job_status_from_proto,
    spool_drop_from_proto,
)
from loadfleet.controller.rpc.runconvert import interval_to_proto, run_to_proto
from loadfleet.v1 import agent_pb2
from loadfleet.wire.stats import StatsRow
from loadfleet.wire.text import is_printable

OSC52 = "\x1b]52;c;ZWNobyBwd25lZAo=\x07"
FAKE = "\x1b[2J\x1b[1;31mFAKE: all targets passed\x1b[0m"


def hello(**fields) -> agent_pb2.Hello:
    fields.setdefault("agent_id", "a1")
    fields.setdefault("hostname", "h")
    fields.setdefault("cores", 2)
    return agent_pb2.Hello(**fields)


# ---------------------------------------------------------------- Hello


@pytest.mark.parametrize(
    "fields, refused",
    [
        ({"cores": 1_000_000}, "cores 1,000,000: more than the 1,024 engines"),  # B6
        ({"cores": 2**32 - 1}, "more than the 1,024 engines"),
        ({"cores": 1025}, "cores 1,025"),
        ({"labels": {f"k{i}": "v" for i in range(65)}}, "65 labels"),
        ({"labels": {"k": "v" * 257}}, "a label is 257 characters"),
        ({"labels": {"k" * 300: "v"}}, "a label is 300 characters"),
        ({"capabilities": ["engine"] * 33}, "33 capabilities"),
        ({"capabilities": ["e" * 257]}, "a capability is 257"),
        ({"allow_targets": ["127.0.0.1/32"] * 1025}, "1,025 allow_targets entries"),
        ({"allow_targets": ["h" * 1000]}, "an allow_targets entry is 1,000"),
        ({"running_jobs": [agent_pb2.RunningJob(job_id="j")] * 1025}, "1,025 running_jobs"),
        ({"running_jobs": [agent_pb2.RunningJob(job_id="j" * 257)]}, "a running job's id is 257"),
        ({"agent_id": "a\x1b[31m"}, "agent_id holds control characters"),
        ({"agent_id": "a\nb"}, "agent_id holds control characters"),
        ({"agent_id": "a" * 257}, "agent_id is 257 characters"),
        ({"hostname": "h" * 257}, "hostname is 257"),
        ({"version": "1" * 10_000}, "version is 10,000"),
        ({"gatling_root": "/" * 4097}, "gatling_root is 4,097"),
        ({"monitor": agent_pb2.MonitorSpec(targets=["t"] * 257)}, "257 monitor targets"),
        ({"monitor": agent_pb2.MonitorSpec(processes=["nginx"] * 257)}, "257 monitor processes"),
        ({"monitor": agent_pb2.MonitorSpec(processes=["n" * 257])}, "a monitor process is 257"),
        ({"monitor": agent_pb2.MonitorSpec(role="r" * 257)}, "monitor role is 257"),
    ],
)
def test_a_hello_claiming_more_than_the_controller_will_use_is_refused(fields, refused):
    started = time.perf_counter()
    with pytest.raises(BadHello, match=refused):
        identity_from_hello(hello(**fields))
    assert time.perf_counter() - started < 0.5


def test_every_problem_of_a_hello_is_told_at_once():
    with pytest.raises(BadHello) as caught:
        identity_from_hello(hello(cores=5000, labels={f"k{i}": "v" for i in range(100)}, hostname="h" * 300))
    told = str(caught.value)
    assert all(problem in told for problem in ("cores 5,000", "100 labels", "hostname is 300 characters")), told


@pytest.mark.parametrize("cores, taken", [(0, 1), (1, 1), (64, 64), (1024, 1024)])
def test_cores_up_to_the_bound_are_taken(cores, taken):
    assert identity_from_hello(hello(cores=cores)).cores == taken


def test_a_hellos_texts_are_made_printable():
    """B8: `loadfleet agents` printed these raw."""
    identity = identity_from_hello(
        hello(
            hostname="h\x1b[31mRED\x1b[0m",
            version="0.1.0\x1b]0;owned\x07",
            labels={"zone\x1b[2J": "eu\nFAKE: passed", "rogue": "yes"},
            allow_targets=["127.0.0.66/32" + OSC52],
            capabilities=["engine\x07"],
            gatling_root="/srv\x1b[8m",
            monitor=agent_pb2.MonitorSpec(targets=["http://t\x1b[1m"], role="lb\x9b2J", processes=["nginx\r"]),
        )
    )
    assert (identity.hostname, identity.version) == ("hRED", "0.1.0")
    assert identity.labels == (("rogue", "yes"), ("zone", "eu FAKE: passed"))
    assert identity.allow_targets == ("127.0.0.66/32",)
    assert identity.capabilities == ("engine\ufffd",)
    assert identity.gatling_root == "/srv"
    assert identity.monitor is not None
    assert (identity.monitor.targets, identity.monitor.role, identity.monitor.processes) == (
        ("http://t",),
        "lb",
        ("nginx ",),
    )


def test_an_ordinary_hello_passes_unchanged():
    fields = {
        "hostname": "web-01.example.com",
        "version": "0.1.0",
        "labels": {"zone": "eu-west", "büro": "köln"},
        "allow_targets": ["10.0.0.0/8", "[::1]:8080"],
        "capabilities": ["engine", "gatling"],
        "gatling_root": "/srv/gatling projects",
    }
    identity = identity_from_hello(hello(**fields))
    assert identity.hostname == fields["hostname"] and identity.version == fields["version"]
    assert dict(identity.labels) == fields["labels"]
    assert list(identity.allow_targets) == fields["allow_targets"]
    assert list(identity.capabilities) == fields["capabilities"]
    assert identity.gatling_root == fields["gatling_root"]


# ---------------------------------------------------------------- heartbeats


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_health_figure_that_is_no_number_is_left_unset(bad):
    """The twelfth: a NaN became line protocol that InfluxDB refused, every second."""
    health = health_from_proto(
        agent_pb2.Health(
            cpu_pct=bad,
            engine_cpu_pct=bad,
            rss_mb=bad,
            loop_lag_ms=bad,
            mem_used_pct=bad,
            busiest_engine_cpu_pct=bad,
            busiest_engine_wait_pct=bad,
        )
    )
    assert (health.cpu_pct, health.engine_cpu_pct, health.rss_mb, health.loop_lag_ms) == (0.0, 0.0, 0.0, 0.0)
    assert (health.mem_used_pct, health.busiest_engine_cpu_pct, health.busiest_engine_wait_pct) == (0.0, 0.0, None)


def test_finite_health_figures_pass():
    health = health_from_proto(agent_pb2.Health(cpu_pct=12.5, rss_mb=300.0, busiest_engine_wait_pct=0.0))
    assert (health.cpu_pct, health.rss_mb, health.busiest_engine_wait_pct) == (12.5, 300.0, 0.0)


def beat(host: agent_pb2.HostStats, sent_at_ms: int = 1_700_000_000_000) -> agent_pb2.Heartbeat:
    return agent_pb2.Heartbeat(sent_at_ms=sent_at_ms, host=host)


def test_a_hosts_figures_that_are_no_number_are_unset_and_such_counters_left_out():
    sample = host_from_proto(
        beat(
            agent_pb2.HostStats(
                cores=8,
                cpu_pct=math.nan,
                mem_used_pct=math.inf,
                net_rx_bytes_per_s=-math.inf,
                net_tx_bytes_per_s=5.0,
                processes=[agent_pb2.ProcessStats(name="nginx", count=2, cpu_pct=math.nan, rss_mb=math.inf)],
                counters=[
                    agent_pb2.ServerCounter(name="haproxy.a.b.req_tot", value=math.nan),
                    agent_pb2.ServerCounter(name="varnish.client_req", value=42.0),
                ],
            )
        ),
        None,
    )
    assert sample is not None
    assert (sample.cpu_pct, sample.mem_used_pct, sample.net_rx_bytes_per_s, sample.net_tx_bytes_per_s) == (
        0.0,
        0.0,
        0.0,
        5.0,
    )
    assert [(p.name, p.count, p.cpu_pct, p.rss_mb) for p in sample.processes] == [("nginx", 2, 0.0, 0.0)]
    assert sample.counters == {"varnish.client_req": 42.0}


def test_a_hosts_lists_are_cut_to_their_bounds_and_its_names_made_printable():
    """B9's heartbeat: 2,000 processes and 2,000 counters each (91 KB), names of any length."""
    sample = host_from_proto(
        beat(
            agent_pb2.HostStats(
                processes=[agent_pb2.ProcessStats(name=f"p{i}\x1b[31m", count=1) for i in range(2000)],
                counters=[agent_pb2.ServerCounter(name=f"c{i}" + "x" * 10_000, value=i) for i in range(5000)],
            )
        ),
        None,
    )
    assert sample is not None
    assert len(sample.processes) == bounds.MAX_HOST_PROCESSES == 256
    assert sample.processes[0].name == "p0"
    assert len(sample.counters) == bounds.MAX_HOST_COUNTERS == 4096
    assert all(len(name) <= bounds.MAX_NAME_CHARS for name in sample.counters)


@pytest.mark.parametrize(
    "cap_pct, kept",
    [
        (50.0, 50.0),
        (100.0 * 4096, 100.0 * 4096),  # 4,096 cores' worth: the bound itself
        (100.0 * 4096 + 1, 0.0),  # past it: unknown, so the host's cores stand for it
        (1e300, 0.0),
        (-100.0, 0.0),
        (math.nan, 0.0),
        (math.inf, 0.0),
        (0.0, 0.0),
    ],
)
def test_a_process_cap_past_its_bound_is_unknown(cap_pct, kept):
    nginx_pb = agent_pb2.ProcessStats(name="nginx", cpu_pct=99, cap_pct=cap_pct)
    sample = host_from_proto(beat(agent_pb2.HostStats(cores=2, processes=[nginx_pb])), None)
    assert sample is not None
    [nginx] = sample.processes
    assert (nginx.cpu_pct, nginx.cap_pct) == (99.0, kept)
    assert bounds.MAX_PROCESS_CAP_PCT == 100 * 4096


@pytest.mark.parametrize(
    "sent_at_ms, offset_ms, kept", [(1_700_000_000_000, 0, True), (2**62, 0, False), (-5, 0, False)]
)
def test_a_host_sample_stamped_where_no_clock_is_is_dropped(sent_at_ms, offset_ms, kept):
    sample = host_from_proto(beat(agent_pb2.HostStats(cores=1), sent_at_ms), None)
    assert (sample is not None) == kept


# ---------------------------------------------------------------- notices


def test_an_engines_last_words_reach_an_event_on_one_printable_line():
    """B8: the audit's stderr_tail, an OSC 52 clipboard write, a screen clear and a fake verdict."""
    failure = engine_failure_from_proto(
        "a1",
        agent_pb2.EngineFailure(
            job_id="j\x1b[2J",
            how="killed by SIGKILL\x1b[8m",
            stderr_tail=f"thread 'main' panicked\n{OSC52}{FAKE}\nnote: run with RUST_BACKTRACE=1\n",
            reported_requests=2**64 - 1,
        ),
    )
    assert failure.stderr_tail == "thread 'main' panicked | FAKE: all targets passed | note: run with RUST_BACKTRACE=1"
    assert (failure.job_id, failure.how) == ("j", "killed by SIGKILL")
    assert failure.reported_requests == bounds.MAX_TOTAL


def test_an_engines_last_words_keep_their_end():
    failure = engine_failure_from_proto("a1", agent_pb2.EngineFailure(stderr_tail="x" * 100_000 + "\nthe end"))
    assert len(failure.stderr_tail) <= bounds.MAX_STDERR_TAIL and failure.stderr_tail.endswith("x | the end")


def test_a_spool_drops_text_is_printable_and_its_counts_bounded():
    drop = spool_drop_from_proto(
        agent_pb2.SpoolDrop(job_id="j", messages=2**64 - 1, reports=5, requests=2**64 - 1, cause=FAKE + "x" * 5000)
    )
    assert drop.cause.startswith("FAKE: all targets passed") and len(drop.cause) <= bounds.MAX_TEXT_CHARS
    assert is_printable(drop.cause)
    assert (drop.messages, drop.reports, drop.requests) == (bounds.MAX_TOTAL, 5, bounds.MAX_TOTAL)


@pytest.mark.parametrize(
    "state, message, expected",
    [
        (agent_pb2.JOB_STATE_FAILED, "no route\x1b[2J\nFAKE", ("j", JobState.FAILED, "no route FAKE")),
        (agent_pb2.JOB_STATE_FINISHED, "", ("j", JobState.FINISHED, "")),
        (999, "x", None),  # proto3 enums are open: a state this controller does not know is ignored
        (agent_pb2.JOB_STATE_UNSPECIFIED, "x", None),
    ],
)
def test_a_job_status_is_known_and_printable(state, message, expected):
    assert job_status_from_proto(agent_pb2.JobStatus(job_id="j", state=state, message=message)) == expected


# ---------------------------------------------------------------- what goes out


def test_listing_a_run_never_fails_on_a_count_past_uint64():
    """B4: ListRuns failed for every operator, for good, once one run's total passed 2^64 - 1."""
    run = SimpleNamespace(
        run_id="r",
        plan_name="p",
        state=RunState.RUNNING,
        started_ms=1,
        finished_ms=0,
        total_requests=2**64 + 49,
        run_dir="/tmp/r",
    )
    assert run_to_proto(run).requests == 2**64 - 1


def test_an_interval_past_uint64_or_below_zero_is_sent_saturated():
    row = StatsRow("*", "*", requests=2**65, status=[0, 2**66, 0, 0, 0], users=2**70)
    update = IntervalUpdate(1000, agents=1, missing=0, lost=0, figures=figures_of(row, 1.0), users=row.users)
    summary = interval_to_proto(update)
    assert (summary.requests, summary.errors, summary.users) == (2**64 - 1, 0, 2**64 - 1)


def test_an_interval_sends_its_checks_summed_over_every_check():
    from loadfleet.wire.checks import CheckCount

    row = StatsRow("*", "*", requests=10, status=[0, 10, 0, 0, 0])
    row.checks = {"login form": CheckCount(9, 1), "extract csrf": CheckCount(8, 2)}
    update = IntervalUpdate(1000, agents=1, missing=0, lost=0, figures=figures_of(row, 1.0), users=0)
    summary = interval_to_proto(update)
    assert (summary.checks_passed, summary.checks_failed) == (17, 3)
