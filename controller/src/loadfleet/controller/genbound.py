"""Generator-bound intervals: when a load generator, not the system under test, was
the limit.

An agent's heartbeat (one a second) carries the busy % of the CPUs it may run on, its
engines' CPU (100 per busy core) and its event-loop lag. A sample is saturated when the
agent's CPUs are at least `SATURATED_CPU_PCT` busy, its engines use at least that share
of the cores they run on, or the loop lag reaches `SATURATED_LOOP_LAG_MS`. The interval a
sample describes (the second before it) is then generator-bound, and so is any step
measured over it: its throughput says how much the generators could send, not how much
the targets could take.

Send lag (open model) is not a sign on its own: it also grows when the targets hold every
connection, which is the targets' limit.
"""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from urllib.parse import urlsplit

from .agents import Health

SATURATED_CPU_PCT = 90.0
SATURATED_LOOP_LAG_MS = 250.0


@dataclass(frozen=True)
class Saturation:
    agent_id: str
    at_ms: int
    reason: str


def saturation(agent_id: str, health: Health, engines: int, at_ms: int) -> Saturation | None:
    """Why this heartbeat shows a saturated generator, or None."""
    reasons = []
    if health.cpu_pct >= SATURATED_CPU_PCT:
        reasons.append(f"CPU {health.cpu_pct:.0f} %")
    if engines and health.engine_cpu_pct >= SATURATED_CPU_PCT * engines:
        reasons.append(f"engines at {health.engine_cpu_pct:.0f} % of {engines} core(s)")
    if health.loop_lag_ms >= SATURATED_LOOP_LAG_MS:
        reasons.append(f"event loop {health.loop_lag_ms:.0f} ms late")
    return Saturation(agent_id, at_ms, ", ".join(reasons)) if reasons else None


@dataclass(frozen=True)
class GeneratorVerdict:
    """A step's verdict: which agents were saturated in how many measured intervals."""

    intervals: int  # measured intervals with at least one saturated agent
    agents: tuple[str, ...]
    reasons: tuple[str, ...]  # one per agent, its first reason
    add_agents: int  # advice: about this many more agents of the same size

    @property
    def bound(self) -> bool:
        return self.intervals > 0

    def describe(self, step: str, measured_intervals: int, *, one_host: bool = False) -> str:
        """`one_host`: the agents share one host with each other or with the targets, so the
        host's CPU, not the number of agents, is the limit."""
        who = "; ".join(f"{a} ({r})" for a, r in zip(self.agents, self.reasons))
        advice = f"Add about {self.add_agents} more agent(s)" + (
            " on other hosts and run it again: these agents share one host with each other or with the "
            "targets, where more of them would compete for the same CPU" if one_host else " and run it again")
        return (f"step {step} is generator-bound in {self.intervals} of {measured_intervals} interval(s): "
                f"{who}; its throughput is what the generators could send, not what the targets can take. "
                + advice)


NOT_BOUND = GeneratorVerdict(0, (), (), 0)


def is_loopback(url: str) -> bool:
    """Whether a target URL names this host (a loopback address or localhost)."""
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def verdict(samples: list[Saturation], interval_starts: list[int], interval_ms: int, n_agents: int,
            demand_ratio: float) -> GeneratorVerdict:
    """The verdict over a step's measured intervals. A sample at `at_ms` describes the
    second before it. `demand_ratio` is offered/achieved where known (open model), else 0:
    the advice is then to double the saturated agents."""
    measured = set(interval_starts)
    bound_intervals: set[int] = set()
    first_reason: dict[str, str] = {}
    for s in samples:
        start = (s.at_ms - 500) // interval_ms * interval_ms
        if start in measured:
            bound_intervals.add(start)
            first_reason.setdefault(s.agent_id, s.reason)
    if not bound_intervals:
        return NOT_BOUND
    saturated = len(first_reason)
    if demand_ratio > 1:
        add = max(1, math.ceil(n_agents * (demand_ratio - 1)))
    else:
        add = saturated
    agents = tuple(sorted(first_reason))
    return GeneratorVerdict(len(bound_intervals), agents, tuple(first_reason[a] for a in agents), add)
