"""Many simulated agents in one process, each on its own gRPC channel (its own TCP
connection, as agents on separate hosts have), sharing one event loop.

`run_fleet` connects the agents in small batches (a thousand simultaneous handshakes
would measure the kernel's accept queue, not the controller), runs them until `stop` is
set or `max_s` has passed, closes every session, and returns the process's results.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from loadfleet.wire.aiowake import drain_wakeups

from . import tls
from .agent import SimAgent, SimAgentConfig, TotalRow
from .outbox import DEFAULT_CAPACITY
from .payload import TemplateCache, histogram_pool
from .stats import FleetStats

# Agents connecting at once, and the pause between batches.
CONNECT_BATCH = 50
CONNECT_PAUSE_S = 0.05
# Each channel gets its own subchannel (TCP connection): by default grpc shares one
# connection between channels to the same address, which no real fleet does.
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1),)
LOOP_LAG_PERIOD_S = 0.1
CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class FleetConfig:
    controller: str
    agents: int
    id_prefix: str = "sim-"
    labels: tuple[tuple[str, str], ...] = ()
    outbox_capacity: int = DEFAULT_CAPACITY
    total_row: TotalRow = TotalRow.AUTO
    # Stop by itself after this long, whatever happens (bounded in time).
    max_s: float = 3600.0
    # Mutual TLS: the directory of the fleet's certificates (fleetsim/tls.py); None: plaintext.
    tls_dir: Path | None = None


def agent_id(config: FleetConfig, index: int) -> str:
    return f"{config.id_prefix}{index:05d}"


async def run_fleet(config: FleetConfig, stop: asyncio.Event, on_ready=lambda: None) -> dict:
    """Runs the fleet; `on_ready` is called once every session has been welcomed (or has failed)."""
    started = time.monotonic()
    templates = TemplateCache(histogram_pool())
    stats = FleetStats()
    channels = [
        tls.channel(config.controller, config.tls_dir, "agent", agent_id(config, i), options=CHANNEL_OPTIONS)
        for i in range(config.agents)
    ]
    drain_wakeups()  # as the controller does: a thousand sessions' completions, not one per loop turn
    agents = [
        SimAgent(
            SimAgentConfig(
                agent_id=agent_id(config, i),
                hostname=f"{config.id_prefix}host{i:05d}",
                labels=config.labels,
                index=i,
                outbox_capacity=config.outbox_capacity,
                total_row=config.total_row,
            ),
            channel,
            templates,
            stats,
        )
        for i, channel in enumerate(channels)
    ]
    tasks: list[asyncio.Task] = []
    lag = asyncio.create_task(_watch_loop_lag(stats), name="loop-lag")
    cpu_ready = wall_ready = None
    try:
        for first in range(0, len(agents), CONNECT_BATCH):
            tasks += [
                asyncio.create_task(a.run(), name=a.config.agent_id) for a in agents[first : first + CONNECT_BATCH]
            ]
            await asyncio.sleep(CONNECT_PAUSE_S)
        await _until_welcomed(
            stats, config.agents, tasks, timeout_s=max(0.0, config.max_s - (time.monotonic() - started))
        )
        on_ready()
        cpu_ready, wall_ready = _cpu_s(), time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, config.max_s - (time.monotonic() - started)))
    finally:
        cpu_end, wall_end = _cpu_s(), time.monotonic()
        for agent in agents:
            agent.close()
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S)
        lag.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, lag, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)
    results = stats.to_json()
    results.update(
        agents=config.agents,
        cpu_s=round(cpu_end - (cpu_ready or cpu_end), 3),
        wall_s=round(wall_end - (wall_ready or wall_end), 3),
        max_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    )
    return results


async def _until_welcomed(stats: FleetStats, agents: int, tasks: list[asyncio.Task], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ended = sum(t.done() for t in tasks)
        if stats.counters["sessions_welcomed"] + ended >= agents:
            return
        await asyncio.sleep(0.05)


async def _watch_loop_lag(stats: FleetStats) -> None:
    """How late this process's event loop wakes up: when the simulator itself is the
    bottleneck, renewal lateness says more about it than about the controller."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + LOOP_LAG_PERIOD_S
        await asyncio.sleep(LOOP_LAG_PERIOD_S)
        stats.loop_lag.record_s(max(0.0, loop.time() - due))


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
