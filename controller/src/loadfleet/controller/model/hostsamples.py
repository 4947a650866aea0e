"""What monitor-only agents report about the servers under load, as values: what a monitor
watches, one heartbeat's sample, a host's mean figures over a window, and the saturated
resource a step's hosts show (analysis/bottleneck.py names it).
"""

from __future__ import annotations

import enum
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
    # The CPU the processes may use, percent of one core (their quota or their CPUs, whichever
    # is less); 0 when the monitor does not say (then the host's cores are their cap).
    cap_pct: float = 0.0


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
class ProcessLoad:
    """One watched process group's mean figures over a window."""

    name: str
    cpu_pct: float  # percent of one core, mean over the window's samples
    cap_pct: float  # what it may use, percent of one core: its reported cap, else the host's cores


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
    cores: int = 0  # as the host's latest sample in the window said
    processes: tuple[ProcessLoad, ...] = ()  # by name, in the order the monitor sends them
    # Servers' gauges (hosts.GAUGE_FIELDS: HAProxy's qcur, scur, slim): means over the window.
    gauges: dict[str, float] = field(default_factory=dict)


class Resource(enum.StrEnum):
    """What ran out."""

    PROCESS_CPU = "process_cpu"  # a server's processes at their CPU cap
    HOST_CPU = "host_cpu"  # every core of the host busy
    CONNECTIONS = "connections"  # a server's connection limit reached
    BACKEND_QUEUE = "backend_queue"  # a balancer holding requests for want of a free backend


@dataclass(frozen=True)
class Bottleneck:
    """A saturated resource a monitor saw during a step: `what` on `host` used `used` of
    `limit` (CPU: percent of one core; connections: connections; a queue: requests
    waiting, its limit 0)."""

    resource: Resource
    host: str
    what: str  # the process, the server and proxy, or the host itself
    used: float
    limit: float

    @property
    def share_pct(self) -> float:
        """How much of its limit is used, in percent (a queue has no limit: 0)."""
        return 100 * self.used / self.limit if self.limit else 0.0

    def describe(self) -> str:
        if self.resource is Resource.PROCESS_CPU:
            return f"{self.what} at {self.share_pct:.0f} % of its {_cpus(self.limit)} on {self.host}"
        if self.resource is Resource.HOST_CPU:
            return f"host {self.host} at {self.share_pct:.0f} % of its {_cpus(self.limit)}"
        if self.resource is Resource.CONNECTIONS:
            return f"{self.what} at {self.used:.0f} of its {self.limit:.0f} connections on {self.host}"
        return f"{self.what} queueing {self.used:.1f} requests on average on {self.host} (no backend free)"


def _cpus(pct_of_one: float) -> str:
    """200 → "2 CPUs", 100 → "1 CPU", 50 → "0.5 CPU"."""
    cpus = pct_of_one / 100
    return f"{cpus:g} CPU" + ("s" if cpus > 1 else "")
