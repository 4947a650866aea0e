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
    """CPU figures are over the time since the previous sample (psutil semantics)."""

    def __init__(self) -> None:
        self._self = psutil.Process(os.getpid())
        self._drivers: dict[int, psutil.Process] = {}
        psutil.cpu_percent(None)

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
            cpu_pct=psutil.cpu_percent(None),
            engine_cpu_pct=engine_cpu,
            rss_mb=rss / 2**20,
            mem_used_pct=psutil.virtual_memory().percent,
            loop_lag_ms=loop_lag_ms,
        )

    @staticmethod
    def _rss(proc: psutil.Process) -> int:
        try:
            return proc.memory_info().rss
        except psutil.Error:
            return 0
