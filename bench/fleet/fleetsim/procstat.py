"""CPU time and resident memory of a process, from /proc, sampled over a run.

CPU is user + system time of every thread of the process (/proc/PID/stat), in clock
ticks (10 ms on Linux): over a 1 s interval that is 1 % of a core, over 250 ms 4 %.
Samples are taken on wall-clock multiples of the run's interval, which is how the
controller aligns intervals (the barrier is such a multiple), so each CPU figure covers
exactly one interval of the run.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3 of proc(5), utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise ProcessLookupError(f"process {pid} has exited (a zombie has no VmRSS)")


def machine_stalls() -> tuple[float, float]:
    """Seconds the machine's CPUs were stolen by the hypervisor (/proc/stat), and seconds some
    task waited for I/O (/proc/pressure/io, 0 without PSI), since boot: when the controller
    stalls, these say whether the machine did."""
    with open("/proc/stat") as f:
        steal_ticks = int(f.readline().split()[8])  # cpu user nice system idle iowait irq softirq steal
    try:
        with open("/proc/pressure/io") as f:
            io_us = int(f.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        io_us = 0
    return steal_ticks / CLOCK_TICKS_PER_S, io_us / 1e6


@dataclass(frozen=True)
class CpuSample:
    """CPU used in [start_ms, start_ms + interval), percent of one core; and over the same
    interval, the machine's stolen CPU (percent of all its CPUs) and I/O stall (ms)."""

    start_ms: int
    cpu_pct: float
    steal_pct: float = 0.0
    io_stall_ms: float = 0.0


@dataclass(frozen=True)
class RssSample:
    at_ms: int
    rss_kb: int


@dataclass
class ProcessSampler:
    """Samples one process until cancelled; a process that has exited ends the sampling.
    O(run length): one sample per interval and per `rss_every_s`, a few thousand an hour."""

    pid: int
    interval_ms: int
    rss_every_s: float
    cpu: list[CpuSample] = field(default_factory=list)
    rss: list[RssSample] = field(default_factory=list)

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:  # one failing cancels the other
                group.create_task(self._sample_cpu(), name="cpu-sampler")
                group.create_task(self._sample_rss(), name="rss-sampler")
        except* (FileNotFoundError, ProcessLookupError):
            pass  # the process has exited: nothing more to sample

    async def _sample_cpu(self) -> None:
        boundary_ms = _next_multiple_ms(self.interval_ms)
        await _sleep_until_ms(boundary_ms)
        last_cpu, last_wall, (last_steal, last_io) = cpu_s(self.pid), time.monotonic(), machine_stalls()
        cpus = os.cpu_count() or 1
        while True:
            boundary_ms += self.interval_ms
            await _sleep_until_ms(boundary_ms)
            cpu, wall, (steal, io) = cpu_s(self.pid), time.monotonic(), machine_stalls()
            # Divide by the time that really passed: this loop may wake a little late.
            elapsed = max(1e-6, wall - last_wall)
            self.cpu.append(
                CpuSample(
                    boundary_ms - self.interval_ms,
                    round(100 * (cpu - last_cpu) / elapsed, 1),
                    steal_pct=round(100 * (steal - last_steal) / elapsed / cpus, 1),
                    io_stall_ms=round(1000 * (io - last_io), 1),
                )
            )
            last_cpu, last_wall, last_steal, last_io = cpu, wall, steal, io

    async def _sample_rss(self) -> None:
        while True:
            self.rss.append(RssSample(int(time.time() * 1000), rss_kb(self.pid)))
            await asyncio.sleep(self.rss_every_s)


@dataclass
class RssGuard:
    """Keeps a runaway controller from taking the shared machine down: past `limit_kb` it
    asks for the run to stop (`stop`); if memory still passes 1.5 x the limit, or the run
    has not ended `kill_after_s` later, it kills the process (`kill`)."""

    pid: int
    limit_kb: int
    period_s: float = 0.5
    kill_after_s: float = 60.0
    tripped_at_kb: int | None = None
    killed: bool = False

    async def run(self, stop, kill) -> None:
        tripped = 0.0
        while True:
            try:
                rss = rss_kb(self.pid)
            except (FileNotFoundError, ProcessLookupError):
                return
            if self.tripped_at_kb is None and rss > self.limit_kb:
                self.tripped_at_kb, tripped = rss, time.monotonic()
                await stop()
            elif self.tripped_at_kb is not None and (
                rss > 1.5 * self.limit_kb or time.monotonic() - tripped > self.kill_after_s
            ):
                kill()
                self.killed = True
                return
            await asyncio.sleep(self.period_s)


def mem_total_kb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    raise OSError("no MemTotal in /proc/meminfo")


def _next_multiple_ms(interval_ms: int) -> int:
    now_ms = int(time.time() * 1000)
    return (now_ms // interval_ms + 1) * interval_ms


async def _sleep_until_ms(wall_ms: int) -> None:
    await asyncio.sleep(max(0.0, wall_ms / 1000 - time.time()))
