"""The plan the bench runs: N agents, R rows per agent report, nobody to load.

R = targets x request names. The targets are discard ports on loopback that nobody
serves: simulated agents never send HTTP, they only report. A closed model with one
client per agent gives every agent a share (the scheduler leaves out agents with none).
"""

from __future__ import annotations

import math

import yaml

MAX_TARGETS = 8
TARGET_PORT = 9  # discard; nothing listens, nothing is sent
AGENT_WAIT_S = 60


def row_shape(rows: int) -> tuple[int, int]:
    """(targets, request names) with targets x names == rows: the largest number of targets
    that is a divisor, at most the names and at most MAX_TARGETS (10 -> 2 x 5, 15 -> 3 x 5)."""
    if rows < 1:
        raise ValueError("rows must be >= 1")
    targets = max(d for d in range(1, min(MAX_TARGETS, math.isqrt(rows)) + 1) if rows % d == 0)
    return targets, rows // targets


def fleet_plan(*, agents: int, rows: int, interval_ms: int, duration_s: float, label: tuple[str, str]) -> str:
    targets, names = row_shape(rows)
    doc = {
        "name": f"fleet-sim-{agents}x{rows}",
        "duration_s": duration_s,
        "interval_ms": interval_ms,
        "targets": [{"url": f"http://127.0.0.{i + 1}:{TARGET_PORT}"} for i in range(targets)],
        "workload": {"keep_alive": True, "requests": [{"name": f"req{i}", "path": f"/req{i}"} for i in range(names)]},
        "load": {"model": "closed", "clients": agents},
        "timeouts": {"connect_ms": 1000, "request_ms": 1000},
        "agents": {"count": agents, "labels": {label[0]: label[1]}, "wait_s": AGENT_WAIT_S},
    }
    return yaml.safe_dump(doc, sort_keys=False)
