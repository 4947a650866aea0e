"""The agent's own health: host CPU and memory, the drivers' CPU and memory."""
from __future__ import annotations

import os
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class HealthSample:
    cpu_pct: float
    engine_cpu_pct: float
    rss_mb: float
    mem_used_pct: float
    loop_lag_ms: float


class HealthMonitor:
    """CPU figures are over the time since the previous sample (psutil semantics).

    `cpu_pct` is the busy share of the CPUs this agent may run on (its affinity, which its
    engines inherit): an agent pinned to a core that something else keeps busy is starved
    even when the rest of the host idles.
    """

    def __init__(self) -> None:
        self._self = psutil.Process(os.getpid())
        self._drivers: dict[int, psutil.Process] = {}
        psutil.cpu_percent(None, percpu=True)

    def sample(self, driver_pids: list[int], loop_lag_ms: float) -> HealthSample:
        engine_cpu = 0.0
        rss = self._rss(self._self)
        for pid in driver_pids:
            proc = self._drivers.get(pid)
            try:
                if proc is None:
                    proc = self._drivers[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)
                engine_cpu += proc.cpu_percent(None)
                rss += self._rss(proc)
            except psutil.Error:
                self._drivers.pop(pid, None)
        for pid in set(self._drivers) - set(driver_pids):
            del self._drivers[pid]
        return HealthSample(
            cpu_pct=self._cpu_pct(),
            engine_cpu_pct=engine_cpu,
            rss_mb=rss / 2**20,
            mem_used_pct=psutil.virtual_memory().percent,
            loop_lag_ms=loop_lag_ms,
        )

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
            return proc.memory_info().rss
        except psutil.Error:
            return 0
