"""Monitored hosts: what monitor-only agents report about the servers under load.

A monitor-only agent runs on a target host (or the NFS server, or a balancer) and sends
that host's CPU, memory, network and server processes with every heartbeat. A run keeps
those samples, and each step gets the hosts' mean figures over its measured window, so a
saturation curve shows the servers' CPU next to their throughput.

Agents that read a server's own counters (HAProxy, Varnish, nfs-ganesha) send them
cumulative; a window gets each counter's rate per second (`counter_rates`).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MonitorInfo:
    """What a monitor-only agent said it watches (Hello.monitor)."""

    targets: tuple[str, ...] = ()
    role: str = ""
    processes: tuple[str, ...] = ()

    def describe(self) -> str:
        return ", ".join(self.targets) or self.role


@dataclass(frozen=True)
class ProcessSample:
    name: str
    count: int
    cpu_pct: float  # percent of one core, summed over the processes
    rss_mb: float


@dataclass(frozen=True)
class HostSample:
    """One heartbeat's figures, over the heartbeat period that ended at `at_ms`."""

    at_ms: int
    cores: int
    cpu_pct: float
    mem_used_pct: float
    net_rx_bytes_per_s: float
    net_tx_bytes_per_s: float
    tcp_established: int
    processes: tuple[ProcessSample, ...] = ()
    counters: dict[str, float] = field(default_factory=dict)  # cumulative, as read at `at_ms`

    @property
    def process_cpu_pct(self) -> float:
        # 0.0, not 0: InfluxDB refuses an integer where other hosts wrote floats.
        return sum((p.cpu_pct for p in self.processes), 0.0)


@dataclass(frozen=True)
class HostLoad:
    """A host's mean figures over a window (a step, or the whole run)."""

    host: str
    role: str
    targets: tuple[str, ...]
    samples: int
    cpu_pct: float
    max_cpu_pct: float
    process_cpu_pct: float  # the watched server processes, percent of one core
    mem_used_pct: float
    net_rx_mb_per_s: float
    net_tx_mb_per_s: float
    tcp_established: float
    counter_rates: dict[str, float] = field(default_factory=dict)  # per second, by counter name


def counter_rates(samples: list[HostSample], start_ms: int, end_ms: int) -> dict[str, float]:
    """Each counter's increase per second over [start, end]: from its first reading in the
    window to its last, or from the last reading before the window when the window holds
    only one (a span that begins before the load starts would dilute the rate). A span over
    which a counter went down (the server restarted) is left out, time and all; so are the
    readings a sample lacks (that server did not answer)."""
    series: dict[str, list[tuple[int, float]]] = {}
    for s in samples:
        if s.at_ms <= end_ms:
            for name, value in s.counters.items():
                series.setdefault(name, []).append((s.at_ms, value))
    rates = {}
    for name, points in sorted(series.items()):
        inside = [i for i, (at_ms, _) in enumerate(points) if at_ms >= start_ms]
        if not inside or (len(inside) == 1 and inside[0] == 0):
            continue
        first = inside[0] if len(inside) > 1 else inside[0] - 1
        increase = elapsed_ms = 0.0
        for (t0, v0), (t1, v1) in zip(points[first:], points[first + 1:]):
            if v1 >= v0:
                increase, elapsed_ms = increase + v1 - v0, elapsed_ms + t1 - t0
        if elapsed_ms > 0:
            rates[name] = increase * 1000 / elapsed_ms
    return rates


@dataclass
class HostRecorder:
    """The samples of every monitored host during one run, in arrival order."""

    period_ms: int  # the heartbeat period a sample covers
    monitors: dict[str, MonitorInfo] = field(default_factory=dict)
    samples: dict[str, list[HostSample]] = field(default_factory=dict)

    def add(self, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        self.monitors[host] = monitor
        self.samples.setdefault(host, []).append(sample)

    def loads(self, start_ms: int, end_ms: int) -> tuple[HostLoad, ...]:
        """Each host's means over the samples whose period's midpoint is in [start, end)."""
        loads = []
        for host in sorted(self.samples):
            inside = [s for s in self.samples[host] if start_ms <= s.at_ms - self.period_ms // 2 < end_ms]
            if inside:
                loads.append(self._load(host, inside, counter_rates(self.samples[host], start_ms, end_ms)))
        return tuple(loads)

    def _load(self, host: str, inside: list[HostSample], rates: dict[str, float]) -> HostLoad:
        monitor = self.monitors[host]

        def mean(values) -> float:
            values = list(values)
            return sum(values) / len(values)

        return HostLoad(
            host=host, role=monitor.role, targets=monitor.targets, samples=len(inside),
            cpu_pct=mean(s.cpu_pct for s in inside), max_cpu_pct=max(s.cpu_pct for s in inside),
            process_cpu_pct=mean(s.process_cpu_pct for s in inside),
            mem_used_pct=mean(s.mem_used_pct for s in inside),
            net_rx_mb_per_s=mean(s.net_rx_bytes_per_s for s in inside) / 1e6,
            net_tx_mb_per_s=mean(s.net_tx_bytes_per_s for s in inside) / 1e6,
            tcp_established=mean(s.tcp_established for s in inside),
            counter_rates=rates)

    def csv(self) -> str:
        """hosts.csv: one row per sample and watched process group (or one without)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["time_ms", "host", "role", "targets", "cores", "cpu_pct", "mem_used_pct",
                         "net_rx_bytes_per_s", "net_tx_bytes_per_s", "tcp_established",
                         "process", "process_count", "process_cpu_pct", "process_rss_mb"])
        for host in sorted(self.samples):
            monitor = self.monitors[host]
            for s in self.samples[host]:
                common = [s.at_ms, host, monitor.role, " ".join(monitor.targets), s.cores, round(s.cpu_pct, 2),
                          round(s.mem_used_pct, 2), round(s.net_rx_bytes_per_s), round(s.net_tx_bytes_per_s),
                          s.tcp_established]
                for p in s.processes or (ProcessSample("", 0, 0.0, 0.0),):
                    writer.writerow([*common, p.name, p.count, round(p.cpu_pct, 2), round(p.rss_mb, 2)])
        return out.getvalue()

    def counters_csv(self) -> str:
        """host_counters.csv: one row per sample and server counter (cumulative values)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["time_ms", "host", "counter", "value"])
        for host in sorted(self.samples):
            for s in self.samples[host]:
                writer.writerows([s.at_ms, host, name, _plain(value)] for name, value in sorted(s.counters.items()))
        return out.getvalue()

    def has_counters(self) -> bool:
        return any(s.counters for samples in self.samples.values() for s in samples)


def _plain(value: float) -> int | float:
    """Counters are whole numbers sent as doubles: 1234567 rather than 1234567.0 in a CSV."""
    return int(value) if float(value).is_integer() else value
