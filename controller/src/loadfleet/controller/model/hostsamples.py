"""What monitor-only agents report about the servers under load, as values: what a monitor
watches, one heartbeat's sample, and a host's mean figures over a window.
"""

from __future__ import annotations

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
