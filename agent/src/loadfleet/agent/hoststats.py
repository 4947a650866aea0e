"""A monitored host's resources: what a monitor-only agent reports with each heartbeat.

Figures are over the time since the previous sample (psutil's semantics for CPU, our own
deltas for network counters), so the first sample after start-up covers start-up itself.
The servers' own counters (servercounters.py) go along as they are, cumulative.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from .servercounters import CounterReader, CounterSource

LOOPBACK = "lo"
# Linux keeps the count of ESTABLISHED TCP connections here (CurrEstab): reading it is
# cheap, unlike listing every socket, which matters on a server holding 10k connections.
TCP_SNMP = Path("/proc/net/snmp")


@dataclass(frozen=True)
class ProcessGroup:
    """Processes reported together: every process called `name`, or the process whose
    PID is in `pid_file` and its children (one server among several of the same kind)."""

    name: str
    pid_file: Path | None = None

    def pids(self) -> set[int]:
        if self.pid_file is None:
            return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == self.name}
        try:
            main = psutil.Process(int(self.pid_file.read_text().split()[0]))
            return {main.pid, *(child.pid for child in main.children(recursive=True))}
        except (OSError, ValueError, IndexError, psutil.Error):
            return set()


@dataclass(frozen=True)
class ProcessFigures:
    name: str
    count: int
    cpu_pct: float  # percent of one core, summed
    rss_mb: float


@dataclass(frozen=True)
class HostFigures:
    cores: int
    cpu_pct: float  # busy share of all cores, 0..100
    mem_used_pct: float
    net_rx_bytes_per_s: float
    net_tx_bytes_per_s: float
    tcp_established: int
    processes: tuple[ProcessFigures, ...] = ()
    counters: dict[str, float] = field(default_factory=dict)  # cumulative, by name


@dataclass
class HostSampler:
    """Samples the host; `interfaces` empty means every interface but loopback (on a lab
    host where the servers listen on 127.0.0.x, pass ("lo",))."""

    groups: tuple[ProcessGroup, ...] = ()
    interfaces: tuple[str, ...] = ()
    counters: CounterReader = field(default_factory=CounterReader)
    _procs: dict[ProcessGroup, dict[int, psutil.Process]] = field(default_factory=dict)
    _net: tuple[float, int, int] = field(init=False)  # set by __post_init__

    def __post_init__(self) -> None:
        psutil.cpu_percent(None)
        self._net = self._net_counters()
        for group in self.groups:
            self._group_figures(group)

    def sample(self) -> HostFigures:
        now, rx, tx = self._net_counters()
        then, rx0, tx0 = self._net
        self._net = (now, rx, tx)
        elapsed = max(now - then, 1e-6)
        return HostFigures(
            cores=psutil.cpu_count() or 1,
            cpu_pct=psutil.cpu_percent(None),
            mem_used_pct=psutil.virtual_memory().percent,
            # Counters can go backwards when an interface disappears (a netns torn down).
            net_rx_bytes_per_s=max(0, rx - rx0) / elapsed,
            net_tx_bytes_per_s=max(0, tx - tx0) / elapsed,
            tcp_established=tcp_established(),
            processes=tuple(self._group_figures(g) for g in self.groups),
            counters=self.counters.read(),
        )

    def _net_counters(self) -> tuple[float, int, int]:
        counters = psutil.net_io_counters(pernic=True)
        names = self.interfaces or tuple(n for n in counters if n != LOOPBACK)
        chosen = [counters[n] for n in names if n in counters]
        return (time.monotonic(), sum(c.bytes_recv for c in chosen), sum(c.bytes_sent for c in chosen))

    def _group_figures(self, group: ProcessGroup) -> ProcessFigures:
        known = self._procs.setdefault(group, {})
        pids = group.pids()
        for gone in set(known) - pids:
            del known[gone]
        cpu = rss = 0.0
        count = 0
        for pid in pids:
            try:
                proc = known.get(pid)
                if proc is None:
                    proc = known[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)  # a new process's first reading only starts its clock
                else:
                    cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
                count += 1
            except psutil.Error:
                known.pop(pid, None)
        return ProcessFigures(name=group.name, count=count, cpu_pct=cpu, rss_mb=rss / 2**20)


def tcp_established() -> int:
    """Established TCP connections on this host (IPv4 and IPv6 share the counter); 0 where
    /proc/net/snmp is not available."""
    try:
        lines = [line.split() for line in TCP_SNMP.read_text().splitlines() if line.startswith("Tcp:")]
        header, values = lines[0], lines[1]
        return int(values[header.index("CurrEstab")])
    except (OSError, IndexError, ValueError):
        return 0


def process_groups(names: list[str], pid_files: list[str]) -> tuple[ProcessGroup, ...]:
    """Groups from the command line: `--process NAME` and `--pid-file [NAME=]PATH` (the
    name shown defaults to the PID file's base name)."""
    groups = [ProcessGroup(name) for name in names]
    for item in pid_files:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = Path(item).stem, item
        groups.append(ProcessGroup(name, Path(os.path.expanduser(path))))
    return tuple(groups)


@dataclass(frozen=True)
class MonitorConfig:
    """A monitor-only agent: the plan targets (or the role) of its host and what to sample."""

    targets: tuple[str, ...] = ()
    role: str = ""
    groups: tuple[ProcessGroup, ...] = ()
    interfaces: tuple[str, ...] = ()
    servers: tuple[CounterSource, ...] = ()  # servers whose own counters go along

    def sampler(self) -> HostSampler:
        return HostSampler(self.groups, self.interfaces, CounterReader(self.servers))
