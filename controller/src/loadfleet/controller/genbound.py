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

import collections
import ipaddress
import math
from dataclasses import dataclass
from urllib.parse import urlsplit

from .agents import Health
from .stream import StepWindow

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


class GeneratorHealth:
    """Watches load agents' heartbeats during each step and counts the step's measured
    intervals in which at least one generator was saturated. Keeps per step the count, the
    first reason of each saturated agent and the last few intervals seen (heartbeats from
    different agents arrive a little out of order): O(agents)."""

    RECENT = 16  # intervals remembered to count each one once

    def __init__(self, heartbeat_ms: int):
        self._heartbeat_ms = heartbeat_ms
        self._step = ""
        self._intervals = 0
        self._recent: collections.deque[int] = collections.deque(maxlen=self.RECENT)
        self._reasons: dict[str, str] = {}

    def on_health(self, step: StepWindow, agent_id: str, health: Health, at_ms: int, engines: int) -> None:
        sample = saturation(agent_id, health, engines, at_ms)
        if step.name != self._step:
            GeneratorHealth.__init__(self, self._heartbeat_ms)
            self._step = step.name
        if sample is None:
            return
        # A heartbeat at t describes the period before it: the interval holding its middle.
        start = (at_ms - self._heartbeat_ms // 2) // step.interval_ms * step.interval_ms
        if not step.measures(start):
            return
        self._reasons.setdefault(agent_id, sample.reason)
        if start not in self._recent:
            self._recent.append(start)
            self._intervals += 1

    def verdict(self, step: str, n_agents: int, demand_ratio: float) -> GeneratorVerdict:
        """The step's verdict. `demand_ratio` is offered/achieved where known (open model),
        else 0: the advice is then to double the saturated agents."""
        if step != self._step or not self._intervals:
            return NOT_BOUND
        saturated = len(self._reasons)
        add = max(1, math.ceil(n_agents * (demand_ratio - 1))) if demand_ratio > 1 else saturated
        agents = tuple(sorted(self._reasons))
        return GeneratorVerdict(self._intervals, agents, tuple(self._reasons[a] for a in agents), add)
