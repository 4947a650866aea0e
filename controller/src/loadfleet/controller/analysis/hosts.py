"""Monitored hosts: what monitor-only agents report about the servers under load.

A monitor-only agent runs on a target host (or the NFS server, or a balancer) and sends
that host's CPU, memory, network and server processes with every heartbeat. A run keeps
those samples, and each step gets the hosts' mean figures over its measured window, so a
saturation curve shows the servers' CPU next to their throughput.

Agents that read a server's own counters (HAProxy, Varnish, nfs-ganesha) send them
cumulative; a window gets each counter's rate per second (`CounterRates`). A few of HAProxy's
figures are gauges, not counters (`GAUGE_FIELDS`: its queue and sessions now, its session
limit): a window gets their means instead, and bottleneck.py reads them.

Samples are not kept: the run directory appends them to hosts.csv as they come, and each
window (a step's measured intervals, the whole run's load) keeps running sums. Every running
run takes every monitor's samples, so the controller takes at most one per monitor per
heartbeat period, of a bounded size (`HostSampleGate`): a monitor that sends more (a bug, or
a hostile agent) cannot fill a run's directory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from loadfleet.controller.model.hostsamples import HostLoad, HostSample, MonitorInfo, ProcessLoad, ProcessSample
from loadfleet.controller.stream.contract import StepWindow

log = logging.getLogger(__name__)

# A monitor's samples taken at once after a stall: its outbox keeps its two latest
# heartbeats (agent/outbox.py), and a third is due by the time they are written.
SAMPLE_BURST = 3
# A sample larger than this (as encoded) is no host's: a monitor reading a large HAProxy
# (100 servers x 13 counters) sends some 60 KB.
MAX_SAMPLE_BYTES = 256 * 1024
# Samples dropped are told once per agent in this many seconds, with their number.
DROP_LOG_PERIOD_S = 60.0
# HAProxy `show stat` fields that are levels, not counts: requests queued now, sessions now,
# the session limit (haproxy.<proxy>.<server>.<field>). Their rate would mean nothing.
GAUGE_FIELDS = ("qcur", "scur", "slim")


def is_gauge(counter: str) -> bool:
    """Whether a server counter's name is a gauge's (GAUGE_FIELDS), whose value is a level."""
    return counter.startswith("haproxy.") and counter.rsplit(".", 1)[-1] in GAUGE_FIELDS


@dataclass
class _Allowance:
    samples: float  # how many may come now (a token bucket)
    at_s: float
    dropped: int = 0
    told_s: float = float("-inf")


class HostSampleGate:
    """Which monitored hosts' samples the controller takes: from each agent, at most one per
    heartbeat period on average and `burst` at once, each at most `max_bytes` as encoded.
    Asked before a sample is decoded (`admit`); the samples refused are counted and told in
    one warning per agent per DROP_LOG_PERIOD_S. Holds a few numbers per agent that sent a
    sample: O(fleet)."""

    def __init__(
        self,
        period_s: float,
        *,
        burst: int = SAMPLE_BURST,
        max_bytes: int = MAX_SAMPLE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._period_s = period_s
        self._burst = burst
        self._max_bytes = max_bytes
        self._clock = clock
        self._agents: dict[str, _Allowance] = {}

    def admit(self, agent_id: str, size_bytes: int) -> bool:
        """Whether to take the agent's sample of `size_bytes` now."""
        now = self._clock()
        allowance = self._agents.get(agent_id)
        if allowance is None:
            allowance = self._agents[agent_id] = _Allowance(self._burst, now)
        allowance.samples = min(self._burst, allowance.samples + (now - allowance.at_s) / self._period_s)
        allowance.at_s = now
        if size_bytes <= self._max_bytes and allowance.samples >= 1:
            allowance.samples -= 1
            return True
        allowance.dropped += 1
        if now - allowance.told_s >= DROP_LOG_PERIOD_S:
            log.warning(
                "agent %s: %d monitored-host sample(s) dropped so far: more than one per %g s heartbeat, "
                "or over %d bytes",
                agent_id,
                allowance.dropped,
                self._period_s,
                self._max_bytes,
            )
            allowance.told_s = now
        return False

    def dropped(self, agent_id: str) -> int:
        """How many of the agent's samples were dropped."""
        allowance = self._agents.get(agent_id)
        return allowance.dropped if allowance else 0


class CounterRates:
    """Each server counter's increase per second over a window [start, end], fed the
    readings in time order (those before the window too; none after it).

    From a counter's first reading in the window to its last, or from the last reading
    before the window when the window holds only one (a span that begins before the load
    starts would dilute the rate). A span over which a counter went down (the server
    restarted) is left out, time and all; so are the readings a sample lacks (that server
    did not answer). Holds O(counters)."""

    def __init__(self, start_ms: int):
        self._start_ms = start_ms
        self._last: dict[str, tuple[int, float]] = {}
        self._inside: dict[str, int] = {}  # readings in the window
        self._lead_in: dict[str, tuple[float, float]] = {}  # (increase, ms) from before the window
        self._spans: dict[str, tuple[float, float]] = {}  # (increase, ms) within the window

    def add(self, sample: HostSample) -> None:
        for name, value in sample.counters.items():
            if is_gauge(name):
                continue
            last = self._last.get(name)
            self._last[name] = (sample.at_ms, value)
            if sample.at_ms < self._start_ms:
                continue
            inside = self._inside.get(name, 0)
            self._inside[name] = inside + 1
            if last is None:
                continue
            t0, v0 = last
            span = (value - v0, sample.at_ms - t0) if value >= v0 else (0.0, 0.0)
            if inside == 0:
                self._lead_in[name] = span
            else:
                increase, elapsed_ms = self._spans.get(name, (0.0, 0.0))
                self._spans[name] = (increase + span[0], elapsed_ms + span[1])

    def rates(self) -> dict[str, float]:
        rates = {}
        for name in sorted(self._inside):
            increase, elapsed_ms = (
                self._spans.get(name, (0.0, 0.0)) if self._inside[name] > 1 else self._lead_in.get(name, (0.0, 0.0))
            )
            if elapsed_ms > 0:
                rates[name] = increase * 1000 / elapsed_ms
        return rates


def counter_rates(samples: list[HostSample], start_ms: int, end_ms: int) -> dict[str, float]:
    """CounterRates over a list of samples (see there)."""
    rates = CounterRates(start_ms)
    for s in samples:
        if s.at_ms <= end_ms:
            rates.add(s)
    return rates.rates()


class _HostMeans:
    """One host's sums over a window: O(counters + processes) whatever the window's length."""

    def __init__(self, monitor: MonitorInfo, start_ms: int):
        self.monitor = monitor
        self.samples = 0
        self.sums = [0.0] * 6  # cpu, process cpu, memory, rx, tx, tcp established
        self.max_cpu_pct = 0.0
        self.cores = 0
        self.counters = CounterRates(start_ms)
        self.processes: dict[str, tuple[float, float]] = {}  # name -> (cpu sum, latest cap)
        self.gauges: dict[str, tuple[float, int]] = {}  # name -> (sum, readings)

    def add(self, s: HostSample, in_window: bool) -> None:
        self.counters.add(s)
        if in_window:
            self.samples += 1
            self.cores = s.cores
            for p in s.processes:
                cpu, _ = self.processes.get(p.name, (0.0, 0.0))
                self.processes[p.name] = (cpu + p.cpu_pct, p.cap_pct)
            for name, value in s.counters.items():
                if is_gauge(name):
                    total, readings = self.gauges.get(name, (0.0, 0))
                    self.gauges[name] = (total + value, readings + 1)
            for i, value in enumerate(
                (
                    s.cpu_pct,
                    s.process_cpu_pct,
                    s.mem_used_pct,
                    s.net_rx_bytes_per_s,
                    s.net_tx_bytes_per_s,
                    s.tcp_established,
                )
            ):
                self.sums[i] += value
            self.max_cpu_pct = max(self.max_cpu_pct, s.cpu_pct)

    def load(self, host: str) -> HostLoad:
        cpu, process, mem, rx, tx, tcp = (v / self.samples for v in self.sums)
        return HostLoad(
            host=host,
            role=self.monitor.role,
            targets=self.monitor.targets,
            samples=self.samples,
            cpu_pct=cpu,
            max_cpu_pct=self.max_cpu_pct,
            process_cpu_pct=process,
            mem_used_pct=mem,
            net_rx_mb_per_s=rx / 1e6,
            net_tx_mb_per_s=tx / 1e6,
            tcp_established=tcp,
            counter_rates=self.counters.rates(),
            cores=self.cores,
            # A group missing from some samples (no process then) counts 0 % for those.
            processes=tuple(
                ProcessLoad(name, cpu / self.samples, cap or 100.0 * max(1, self.cores))
                for name, (cpu, cap) in self.processes.items()
            ),
            gauges={name: total / readings for name, (total, readings) in sorted(self.gauges.items())},
        )


class HostWindow:
    """Every monitored host's means over one window [start, end): the samples whose
    heartbeat period has its midpoint inside (a sample at t covers the period before t).
    The end may move earlier while samples come (a step stopped early); samples arrive in
    time order. O(hosts × counters)."""

    def __init__(self, start_ms: int, period_ms: int):
        self.start_ms = start_ms
        self._period_ms = period_ms
        self._hosts: dict[str, _HostMeans] = {}

    def add(self, host: str, monitor: MonitorInfo, sample: HostSample, end_ms: int) -> None:
        if sample.at_ms > end_ms:
            return
        means = self._hosts.get(host)
        if means is None:
            means = self._hosts[host] = _HostMeans(monitor, self.start_ms)
        middle = sample.at_ms - self._period_ms // 2
        means.add(sample, self.start_ms <= middle < end_ms)

    def loads(self) -> tuple[HostLoad, ...]:
        return tuple(m.load(host) for host, m in sorted(self._hosts.items()) if m.samples)


class HostRecorder:
    """Monitored hosts' means for each step (over its measured window) and for the whole
    run (from its first load to the end of the latest step's). Keeps the running step's
    window, every ended step's loads and the run's window: O(steps + hosts × counters)."""

    def __init__(self, period_ms: int):
        self._period_ms = period_ms
        self._run: HostWindow | None = None
        self._step = ""
        self._window: HostWindow | None = None
        self._ended: dict[str, tuple[HostLoad, ...]] = {}

    def on_host(self, step: StepWindow, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        if self._run is None:
            self._run = HostWindow(step.load_start_ms, self._period_ms)
        self._run.add(host, monitor, sample, step.load_end_ms)
        if step.name != self._step:
            self._close_step()
            self._step, self._window = step.name, HostWindow(step.measured_start_ms, self._period_ms)
        assert self._window is not None  # there is one while _step names a step (steps have names)
        self._window.add(host, monitor, sample, step.measured_end_ms)

    def step_loads(self, step: str) -> tuple[HostLoad, ...]:
        if step == self._step:
            self._close_step()
        return self._ended.get(step, ())

    def run_loads(self) -> tuple[HostLoad, ...]:
        return self._run.loads() if self._run else ()

    def _close_step(self) -> None:
        if self._window is not None:
            self._ended[self._step] = self._window.loads()
        self._step, self._window = "", None


def host_csv_rows(host: str, monitor: MonitorInfo, s: HostSample) -> list[list[object]]:
    """hosts.csv rows of one sample: one per watched process group (or one without)."""
    common = [
        s.at_ms,
        host,
        monitor.role,
        " ".join(monitor.targets),
        s.cores,
        round(s.cpu_pct, 2),
        round(s.mem_used_pct, 2),
        round(s.net_rx_bytes_per_s),
        round(s.net_tx_bytes_per_s),
        s.tcp_established,
    ]
    return [
        [*common, p.name, p.count, round(p.cpu_pct, 2), round(p.rss_mb, 2)]
        for p in s.processes or (ProcessSample("", 0, 0.0, 0.0),)
    ]


def counter_csv_rows(host: str, s: HostSample) -> list[list[object]]:
    """host_counters.csv rows of one sample: one per server counter (cumulative values)."""
    return [[s.at_ms, host, name, _plain(value)] for name, value in sorted(s.counters.items())]


HOSTS_CSV_HEADER = [
    "time_ms",
    "host",
    "role",
    "targets",
    "cores",
    "cpu_pct",
    "mem_used_pct",
    "net_rx_bytes_per_s",
    "net_tx_bytes_per_s",
    "tcp_established",
    "process",
    "process_count",
    "process_cpu_pct",
    "process_rss_mb",
]
COUNTERS_CSV_HEADER = ["time_ms", "host", "counter", "value"]


def _plain(value: float) -> int | float:
    """Counters are whole numbers sent as doubles: 1234567 rather than 1234567.0 in a CSV."""
    return int(value) if float(value).is_integer() else value
