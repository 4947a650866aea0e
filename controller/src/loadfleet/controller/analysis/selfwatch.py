"""The controller's own health: does its event loop keep up with the fleet?

Everything the controller does for its agents (reading their messages, merging intervals,
answering each heartbeat with a lease renewal) runs on one asyncio event loop. While the
loop is busy, every renewal waits; a wait longer than the lease costs the run its agents.
Agents can only see the round trip, which holds their own delays and the network's too;
this module measures the controller's share directly.

`LoopProbe` wakes every `PROBE_PERIOD_S` and notes how late it woke (the loop lag: how
long a callback that became ready then waited, such as a heartbeat's answer), and tells its
`on_wake` first (the controller judges its agents' silence there, forgiving the silence its
own stall caused: one clock of the loop's health, not two). Once a
`SAMPLE_PERIOD_S` it hands on a `ControllerSample`: the second's worst lag, the process's
CPU (all threads, % of one core) and RSS, and the agents connected. Each running run's
stream carries the samples (controller.csv, InfluxDB `controller`), and the run's
`ControllerRecorder` folds them into the summary's `controller` block and raises a
`controller_stalled` event when a second's lag reached `STALL_MS`. A stall also names
itself: `StallStacks` has the stacks of the controller's threads written to its log while
the loop is stuck (a CPU burst or a wait that nothing else in the run directory explains).
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.selfsample import STALL_MS, ControllerLoad, ControllerSample
from loadfleet.wire.histogram import EMPTY, Histogram

PROBE_PERIOD_S = 0.1
SAMPLE_PERIOD_S = 1.0
# After a stall event, further stalls raise none for this long (they are all counted).
STALL_EVENT_PERIOD_S = 60.0

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")

log = logging.getLogger(__name__)


def rss_bytes() -> int:
    """This process's resident memory (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


class LoopProbe:
    """Measures the event loop it runs on; `run` hands each sample to `emit`."""

    def __init__(
        self,
        emit: Callable[[ControllerSample], None],
        agents: Callable[[], int],
        on_wake: Callable[[float], None] = lambda late_s: None,
        stacks: StallStacks | None = None,
    ):
        """`on_wake(late_s)` runs at each wake, before anything else the probe does, with how
        late the loop woke (seconds); `stacks` is armed for each nap (none written without)."""
        self._emit = emit
        self._agents = agents
        self._on_wake = on_wake
        self._stacks = stacks or StallStacks(None)

    async def run(self) -> None:
        try:
            await self._probe()
        finally:
            self._stacks.disarm()

    async def _probe(self) -> None:
        cpu_before, wall_before = time.process_time(), time.monotonic()
        while True:
            # Probes until the period is over: a late loop makes fewer, not a longer period.
            worst_s = 0.0
            while (left_s := wall_before + SAMPLE_PERIOD_S - time.monotonic()) > 0:
                nap_s = min(PROBE_PERIOD_S, left_s)
                due = time.monotonic() + nap_s
                self._stacks.arm(nap_s)
                await asyncio.sleep(nap_s)
                late_s = time.monotonic() - due
                worst_s = max(worst_s, late_s)
                self._stacks.woke(late_s)
                self._guarded(self._on_wake, late_s)
            cpu, wall = time.process_time(), time.monotonic()
            sample = ControllerSample(
                at_ms=int(time.time() * 1000),
                loop_lag_ms=worst_s * 1000,
                cpu_pct=100 * (cpu - cpu_before) / max(wall - wall_before, 1e-9),
                rss_mb=rss_bytes() / 2**20,
                agents=self._agents(),
            )
            cpu_before, wall_before = cpu, wall
            self._guarded(self._emit, sample)

    @staticmethod
    def _guarded(call: Callable[[Any], object], value: object) -> None:
        try:
            call(value)
        except Exception:  # one run's bug must not stop the probe, or the agents' judging, for all
            log.exception("the loop probe's %s failed", getattr(call, "__name__", call))


class StallStacks:
    """Writes the stacks of the process's threads to `file` when the loop has been
    `STALL_MS` late (faulthandler's watchdog: a thread in C that needs neither the loop nor
    the GIL, so it writes while the loop is still stuck), at most once per
    `STALL_EVENT_PERIOD_S`. The loop's thread is the one whose stack shows what held it; one
    stuck in a C call (a garbage collection, a JSON dump) shows the Python line that called it.
    Arming starts the watchdog's thread and the next wake joins it: ~30 µs of CPU and ~0.2 ms
    of the loop's time each, ten times a second (measured: 2,000 of them)."""

    def __init__(self, file: TextIO | None = sys.stderr, clock: Callable[[], float] = time.monotonic):
        """None, or a file without a descriptor (faulthandler writes to one), writes nothing."""
        self._file = file if file is not None and _has_fileno(file) else None
        self._clock = clock
        self._quiet_until = 0.0

    def arm(self, nap_s: float) -> None:
        """The loop sleeps `nap_s`: stacks are written if it has not woken `STALL_MS` after."""
        if self._file is None or self._clock() < self._quiet_until:
            return
        faulthandler.dump_traceback_later(nap_s + STALL_MS / 1000, file=self._file)

    def woke(self, late_s: float) -> None:
        if self._file is None:
            return
        self.disarm()
        if late_s * 1000 >= STALL_MS and self._clock() >= self._quiet_until:
            self._quiet_until = self._clock() + STALL_EVENT_PERIOD_S
            log.warning(
                "the event loop woke %.1f s late: the stacks of the controller's threads while it was "
                "stuck are written above (the loop's thread shows what held it)",
                late_s,
            )

    def disarm(self) -> None:
        if self._file is not None:
            faulthandler.cancel_dump_traceback_later()


def _has_fileno(file: TextIO) -> bool:
    try:
        file.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return False
    return True


class ControllerRecorder:
    """A run's consumer of controller samples: running figures, O(1) in the run's length
    (the lags' histogram has at most one bucket per distinct value, a few hundred)."""

    def __init__(self, emit: Callable[[Event], object], clock: Callable[[], float] = time.monotonic):
        self._emit = emit
        self._clock = clock
        self._lags = EMPTY
        self._samples = self._stalls = self._agents_max = 0
        self._lag_max_ms = self._cpu_sum = self._cpu_max = self._rss_max = 0.0
        self._last_event_s: float | None = None
        self._stalls_untold = 0

    def on_controller(self, sample: ControllerSample) -> None:
        self._samples += 1
        self._lags = Histogram.merge([self._lags, Histogram.of([int(sample.loop_lag_ms * 1000)])])
        self._lag_max_ms = max(self._lag_max_ms, sample.loop_lag_ms)
        self._cpu_sum += sample.cpu_pct
        self._cpu_max = max(self._cpu_max, sample.cpu_pct)
        self._rss_max = max(self._rss_max, sample.rss_mb)
        self._agents_max = max(self._agents_max, sample.agents)
        if sample.loop_lag_ms >= STALL_MS:
            self._stalls += 1
            self._stall(sample)

    def _stall(self, sample: ControllerSample) -> None:
        now = self._clock()
        if self._last_event_s is not None and now - self._last_event_s < STALL_EVENT_PERIOD_S:
            self._stalls_untold += 1
            return
        clock = time.strftime("%H:%M:%S", time.localtime(sample.at_ms / 1000))
        more = f"; {self._stalls_untold} more stall(s) since the last such event" if self._stalls_untold else ""
        self._emit(
            Event(
                EventKind.CONTROLLER_STALLED,
                f"the controller's event loop was {sample.loop_lag_ms:,.0f} ms late in the second to {clock} "
                f"(controller CPU {sample.cpu_pct:.0f} % of a core, {sample.agents} agents): heartbeats, lease "
                f"renewals and reports waited that long{more}; a controller that keeps stalling needs a core "
                "to itself or fewer agents",
                at_ms=sample.at_ms,
            )
        )
        self._last_event_s, self._stalls_untold = now, 0

    def load(self) -> ControllerLoad | None:
        """None before the first sample (a run shorter than a second)."""
        if not self._samples:
            return None
        # A bucket's highest value can pass the exact maximum by its width (0.1 %).
        p50, p99 = (min(us / 1000, self._lag_max_ms) for us in self._lags.percentiles([50, 99]))
        return ControllerLoad(
            samples=self._samples,
            loop_lag_p50_ms=p50,
            loop_lag_p99_ms=p99,
            loop_lag_max_ms=self._lag_max_ms,
            stalls=self._stalls,
            cpu_mean_pct=self._cpu_sum / self._samples,
            cpu_max_pct=self._cpu_max,
            rss_max_mb=self._rss_max,
            agents_max=self._agents_max,
        )
