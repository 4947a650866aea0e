"""A monitored host's resources: what a monitor-only agent reports with each heartbeat.

Figures are over the time since the previous sample (psutil's semantics for CPU, our own
deltas for network counters), so the first sample after start-up covers start-up itself.
The servers' own counters (servercounters.py) go along as they are, cumulative.

Each process group goes with its CPU cap (`CpuCaps`): what its processes may use, in percent
of one core, the lower of their CPUs (affinity) and their cgroup's CPU quota. A server pinned
to one core of a 64-core host is saturated at 100 %, which the host's CPU never shows; the
controller names it the bottleneck (analysis/bottleneck.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import psutil

from .servercounters import CounterReader, CounterSource

LOOPBACK = "lo"
PROC_ROOT = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")
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
    cap_pct: float = 0.0  # what they may use, percent of one core (CpuCaps); 0: unknown


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


@dataclass(frozen=True)
class CpuCaps:
    """The CPU processes may use, read from `proc_root` (/proc) and `cgroup_root`
    (/sys/fs/cgroup; tests pass fake trees).

    A group's cap is the lower of its CPUs x 100 (the union of its processes' affinity, at
    most the host's cores) and its cgroups' quotas summed (each distinct cgroup of its
    processes; a cgroup's quota is the lowest on its path to the root, since a parent's quota
    binds its children). A cgroup without a quota, or none found, leaves the CPUs as the cap.
    Processes whose files cannot be read (gone, another PID namespace) are left out; with
    none left the cap is 0 (unknown). Where distinct cgroups share a quota'd parent the sum
    is too high: a cap too high misses a bottleneck, one too low would invent it."""

    proc_root: Path = PROC_ROOT
    cgroup_root: Path = CGROUP_ROOT

    def cap_pct(self, pids: Iterable[int], cores: int) -> float:
        """Percent of one core the processes `pids` may use together; 0.0: unknown."""
        cpus: set[int] = set()
        cgroups: set[str] = set()
        for pid in pids:
            try:
                status = (self.proc_root / str(pid) / "status").read_text()
                cgroup = (self.proc_root / str(pid) / "cgroup").read_text()
            except OSError:
                continue
            allowed = allowed_cpus(status)
            if allowed:
                cpus |= allowed
                cgroups.add(cgroup)
        if not cpus:
            return 0.0
        cap = 100.0 * min(len(cpus), max(1, cores))
        quotas = [self.quota_pct(c) for c in cgroups]
        if all(q is not None for q in quotas):
            cap = min(cap, sum(q for q in quotas if q is not None))
        return cap

    def quota_pct(self, proc_cgroup: str) -> float | None:
        """The CPU quota, percent of one core, binding a process whose /proc/<pid>/cgroup
        reads `proc_cgroup`: the lowest on the cgroup's path, in cgroup v2 or v1's cpu
        hierarchy (a host uses one of them for the cpu controller); None: no quota."""
        found = [q for level in self._levels(proc_cgroup) if (q := self._level_quota(level)) is not None]
        return min(found, default=None)

    def _levels(self, proc_cgroup: str) -> Iterator[Path]:
        """Each directory from the process's cgroup up to its hierarchy's root, in each place
        the hierarchy may be mounted: v2 at the root (or at unified/ beside v1), v1's cpu
        controller at cpu/ or at its co-mounted name (cpu,cpuacct/)."""
        for line in proc_cgroup.splitlines():
            _hierarchy, sep, rest = line.partition(":")
            controllers, sep2, path = rest.partition(":")
            if not (sep and sep2):
                continue
            if controllers == "":
                v2 = (self.cgroup_root, self.cgroup_root / "unified")
                mounts = [m for m in v2 if (m / "cgroup.controllers").exists()]
            elif "cpu" in controllers.split(","):
                mounts = [self.cgroup_root / controllers, self.cgroup_root / "cpu"]
            else:
                continue
            rel = PurePosixPath(path.lstrip("/"))
            mount = next((m for m in mounts if (m / rel).is_dir()), None)
            if mount is None or ".." in rel.parts:
                continue  # not mounted here, or outside this cgroup namespace's view
            for ancestor in (rel, *rel.parents):
                yield mount / ancestor

    @staticmethod
    def _level_quota(directory: Path) -> float | None:
        try:
            if (directory / "cpu.max").exists():
                return quota_pct_v2((directory / "cpu.max").read_text())
            if (directory / "cpu.cfs_quota_us").exists():
                quota = (directory / "cpu.cfs_quota_us").read_text()
                return quota_pct_v1(quota, (directory / "cpu.cfs_period_us").read_text())
        except OSError:
            return None
        return None


@dataclass
class HostSampler:
    """Samples the host; `interfaces` empty means every interface but loopback (on a lab
    host where the servers listen on 127.0.0.x, pass ("lo",))."""

    groups: tuple[ProcessGroup, ...] = ()
    interfaces: tuple[str, ...] = ()
    counters: CounterReader = field(default_factory=CounterReader)
    caps: CpuCaps = field(default_factory=CpuCaps)
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
        counted = []
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
                counted.append(pid)
            except psutil.Error:
                known.pop(pid, None)
        cap = self.caps.cap_pct(counted, psutil.cpu_count() or 1)
        return ProcessFigures(name=group.name, count=count, cpu_pct=cpu, rss_mb=rss / 2**20, cap_pct=cap)


def allowed_cpus(proc_status: str) -> set[int]:
    """The CPUs of /proc/<pid>/status's Cpus_allowed_list ("0-3,8"); empty when it has none."""
    for line in proc_status.splitlines():
        key, _, value = line.partition(":")
        if key == "Cpus_allowed_list":
            return cpu_list(value.strip())
    return set()


def cpu_list(text: str) -> set[int]:
    """A kernel CPU list ("0-3,8,10-11") as its CPUs; empty for anything else."""
    cpus: set[int] = set()
    try:
        for part in filter(None, text.split(",")):
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        return set()
    return cpus


def quota_pct_v2(cpu_max: str) -> float | None:
    """cgroup v2 `cpu.max` ("QUOTA PERIOD", microseconds; "max PERIOD": none) as percent of one core."""
    quota, _, period = cpu_max.strip().partition(" ")
    return _quota_pct(quota, period)


def quota_pct_v1(cfs_quota_us: str, cfs_period_us: str) -> float | None:
    """cgroup v1 `cpu.cfs_quota_us` (-1: none) over `cpu.cfs_period_us`, as percent of one core."""
    return _quota_pct(cfs_quota_us.strip(), cfs_period_us.strip())


def _quota_pct(quota: str, period: str) -> float | None:
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:
        return None  # "max", or unreadable: no quota known
    if quota_us <= 0 or period_us <= 0:
        return None  # v1's -1: no quota
    return 100.0 * quota_us / period_us


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
