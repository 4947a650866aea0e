"""An agent's health as its heartbeats tell it: the values the fleet, the stream and the
validity rules share.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Health:
    cpu_pct: float = 0.0
    engine_cpu_pct: float = 0.0
    rss_mb: float = 0.0
    loop_lag_ms: float = 0.0
    mem_used_pct: float = 0.0
    # The busiest engine's CPU and CPU wait, % of one core (wait None: not read).
    busiest_engine_cpu_pct: float = 0.0
    busiest_engine_wait_pct: float | None = None
    # The engine closest to its descriptor limit, and ports toward the busiest destination
    # (limits 0: not read).
    engine_fds: int = 0
    engine_fd_limit: int = 0
    local_ports_used: int = 0
    local_port_range: int = 0
