"""The agent's own health: host CPU and memory, the drivers' CPU and memory, and what
says whether its engines themselves ran out of something (the busiest engine's CPU and
CPU wait, file descriptors against their limit, ephemeral ports against their range).

Everything here is read once a second with the heartbeat, so each figure is cheap: psutil
for CPU and memory, one small /proc file per engine thread for the wait, a directory
listing per engine for descriptors, /proc/net/sockstat for ports (the host's TCP sockets:
an upper bound of the ports held toward any one destination).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

PROC = Path("/proc")
PORT_RANGE_FILE = PROC / "sys/net/ipv4/ip_local_port_range"
SOCKSTAT_FILE = PROC / "net/sockstat"
# No exact count per destination from /proc/net/tcp: that lists every TCP socket of the host, and
# on a generator holding 8,000 connections on loopback (16,000 sockets and more) one read froze
# the generator's core for seconds, engines and agents alike, until the agents' leases expired
# (study 003); without the read the same run went through. A destination that does run out of
# ports shows as the engines' `local_ports` errors (EADDRNOTAVAIL).


@dataclass(frozen=True)
class HealthSample:
    cpu_pct: float
    engine_cpu_pct: float
    rss_mb: float
    mem_used_pct: float
    loop_lag_ms: float
    busiest_engine_cpu_pct: float = 0.0
    busiest_engine_wait_pct: float | None = None  # None: schedstat not readable
    engine_fds: int = 0
    engine_fd_limit: int = 0
    local_ports_used: int = 0
    local_port_range: int = 0


class HealthMonitor:
    """CPU figures are over the time since the previous sample (psutil semantics).

    `cpu_pct` is the busy share of the CPUs this agent may run on (its affinity, which its
    engines inherit): an agent pinned to a core that something else keeps busy is starved
    even when the rest of the host idles. Holds a process handle and a wait total per
    driver: O(drivers).
    """

    def __init__(self, *, proc: Path = PROC) -> None:
        self._proc = proc
        self._self = psutil.Process(os.getpid())
        self._drivers: dict[int, psutil.Process] = {}
        self._waits: dict[int, tuple[float, int]] = {}  # pid -> (monotonic s, wait ns so far)
        self._port_range = port_range(proc / PORT_RANGE_FILE.relative_to(PROC))
        psutil.cpu_percent(None, percpu=True)

    def sample(self, driver_pids: list[int], loop_lag_ms: float) -> HealthSample:
        engine_cpu = busiest_cpu = 0.0
        busiest_wait: float | None = None
        fds = fd_limit = 0
        rss = self._rss(self._self)
        for pid in driver_pids:
            proc = self._drivers.get(pid)
            try:
                if proc is None:
                    proc = self._drivers[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)
                cpu = proc.cpu_percent(None)
                engine_cpu += cpu
                rss += self._rss(proc)
            except psutil.Error:
                self._drivers.pop(pid, None)
                continue
            wait = self._wait_pct(pid)
            if cpu + (wait or 0.0) >= busiest_cpu + (busiest_wait or 0.0):
                busiest_cpu, busiest_wait = cpu, wait
            n, limit = _fds(proc)
            if limit and (not fd_limit or n / limit > fds / fd_limit):
                fds, fd_limit = n, limit
        for pid in set(self._drivers) - set(driver_pids):
            self._drivers.pop(pid, None)
            self._waits.pop(pid, None)
        ports = self._ports_used() if self._port_range else 0
        return HealthSample(
            cpu_pct=self._cpu_pct(),
            engine_cpu_pct=engine_cpu,
            rss_mb=rss / 2**20,
            mem_used_pct=psutil.virtual_memory().percent,
            loop_lag_ms=loop_lag_ms,
            busiest_engine_cpu_pct=busiest_cpu,
            busiest_engine_wait_pct=busiest_wait,
            engine_fds=fds,
            engine_fd_limit=fd_limit,
            local_ports_used=ports,
            local_port_range=self._port_range,
        )

    def _wait_pct(self, pid: int) -> float | None:
        """The share of one core's time the process's threads were runnable but waited
        for a CPU, since the previous sample; None on the first sample or without schedstat."""
        total = schedstat_wait_ns(self._proc / str(pid) / "task")
        if total is None:
            return None
        now = time.monotonic()
        before = self._waits.get(pid)
        self._waits[pid] = (now, total)
        if before is None or now <= before[0]:
            return None
        return max(0, total - before[1]) / 1e9 / (now - before[0]) * 100

    def _ports_used(self) -> int:
        """An upper bound of the ports held toward one destination: the host's TCP sockets,
        TIME_WAIT included (on loopback both ends of a connection count)."""
        return sockstat_tcp(self._proc / SOCKSTAT_FILE.relative_to(PROC))

    def _cpu_pct(self) -> float:
        per_cpu = psutil.cpu_percent(None, percpu=True)
        try:
            mine = [per_cpu[i] for i in self._self.cpu_affinity() if i < len(per_cpu)]
        except (psutil.Error, AttributeError):  # no affinity on this platform
            mine = per_cpu
        return sum(mine) / len(mine) if mine else 0.0

    @staticmethod
    def _rss(proc: psutil.Process) -> int:
        try:
            return int(proc.memory_info().rss)
        except psutil.Error:
            return 0


def _fds(proc: psutil.Process) -> tuple[int, int]:
    """Open descriptors and the soft RLIMIT_NOFILE; (0, 0) when they cannot be read."""
    try:
        return proc.num_fds(), max(0, proc.rlimit(psutil.RLIMIT_NOFILE)[0])
    except (psutil.Error, AttributeError, OSError):
        return 0, 0


def schedstat_wait_ns(task_dir: Path) -> int | None:
    """The run-queue wait of every thread in `task_dir` (/proc/<pid>/task), summed: the
    second field of each thread's schedstat. None when none can be read."""
    total, read = 0, False
    try:
        threads = list(task_dir.iterdir())
    except OSError:
        return None
    for thread in threads:
        try:
            fields = (thread / "schedstat").read_text().split()
            total += int(fields[1])
            read = True
        except (OSError, IndexError, ValueError):
            continue
    return total if read else None


def port_range(path: Path) -> int:
    """How many ephemeral ports net.ipv4.ip_local_port_range offers; 0 when unreadable."""
    try:
        low, high = (int(v) for v in path.read_text().split()[:2])
    except (OSError, ValueError):
        return 0
    return max(0, high - low + 1)


def sockstat_tcp(path: Path) -> int:
    """TCP sockets in use plus those in TIME_WAIT (/proc/net/sockstat)."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("TCP:"):
                fields = line.split()[1:]
                values = dict(zip(fields[::2], fields[1::2]))
                return int(values.get("inuse", 0)) + int(values.get("tw", 0))
    except (OSError, ValueError):
        pass
    return 0
