"""Who runs what share, and when.

Load is split across agents in proportion to their cores with the largest-remainder
method, so shares are whole numbers that add up exactly to the plan's total. Every
agent starts at the same absolute time (barrier start), a little in the future and
aligned to an interval boundary so that all drivers' intervals line up.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# How far ahead the barrier is set: time for every agent to receive its assignment
# and start its drivers before load begins.
DEFAULT_BARRIER_LEAD_MS = 2000


@dataclass(frozen=True)
class AgentShare:
    agent_id: str
    clients: int


def split_exact(total: int, weights: list[int]) -> list[int]:
    """Splits `total` into whole parts proportional to `weights`, summing to `total`.

    Ties in the remainders go to the earlier weight, so the result is deterministic.
    """
    if not weights or sum(weights) <= 0:
        raise ValueError("split_exact needs at least one positive weight")
    weight_sum = sum(weights)
    exact = [total * w / weight_sum for w in weights]
    parts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


def split_clients(clients: int, agents: list[tuple[str, int]]) -> list[AgentShare]:
    """Shares of `clients` for (agent_id, cores) pairs; agents whose share is 0 are left out."""
    parts = split_exact(clients, [max(1, cores) for _, cores in agents])
    return [AgentShare(agent_id, n) for (agent_id, _), n in zip(agents, parts) if n > 0]


def barrier_start_ms(now_ms: int, interval_ms: int, lead_ms: int = DEFAULT_BARRIER_LEAD_MS) -> int:
    """The first interval boundary at least `lead_ms` after `now_ms`."""
    earliest = now_ms + lead_ms
    return -(-earliest // interval_ms) * interval_ms
