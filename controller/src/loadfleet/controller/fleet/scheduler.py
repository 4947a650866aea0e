"""Who runs what share, and when.

Load is split over every engine slot of the fleet (one per agent core) at once, with
the exact split of `load.split_load`, so every total (clients, users, budgets) adds up
exactly and agents get load in proportion to their cores. Each engine's users (closed
clients, users) are numbered fleet-wide from its `first_user`, the sum of the peaks of the
engines before it, so no two users of a step share `${user}`. Every agent starts at the
same absolute time (barrier start), a little in the future and aligned to an interval
boundary so that all drivers' intervals line up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from loadfleet.controller.model.codec import OMIT_DEFAULT
from loadfleet.controller.model.load import IDLE_LOAD, Load, LoadModel, Stage, split_load

# The most engines one agent runs (one per core it offers): an agent's Hello offering more
# cores is refused (rpc/convert.py), so the work of splitting load is bounded by what the
# controller will ever use, not by a number an agent claims.
MAX_ENGINES_PER_AGENT = 1024
# How far ahead the barrier is set: time for every agent to receive its assignment
# and start its drivers before load begins.
DEFAULT_BARRIER_LEAD_MS = 2000


@dataclass(frozen=True)
class EngineShare:
    load: Load
    max_requests: int = 0
    # The fleet-wide index of the engine's first user (JobSpec.first_user of the agent's first
    # engine; the agent numbers its other engines on in the same order, agent job.py).
    first_user: int = 0
    # With several scenarios (split_scenarios): this engine's share of each plan scenario, in
    # the plan's order (None: idle in it); `load` is then IDLE_LOAD. Empty for a plain plan,
    # and then not in the journal (a plain run's journal as before scenarios).
    scenarios: tuple[ScenarioShare | None, ...] = field(default=(), metadata={OMIT_DEFAULT: True})
    # A unique feed's rows handed to this engine after a loss (handover.py), as ranges of the
    # file taken in order after its own slice; empty (and not in the journal) until then.
    feed_added: tuple[tuple[int, int], ...] = field(default=(), metadata={OMIT_DEFAULT: True})


@dataclass(frozen=True)
class ScenarioShare:
    """One engine's share of one scenario; its users are numbered from `first_user`."""

    load: Load
    max_requests: int = 0
    first_user: int = 0


def users_of(load: Load) -> int:
    """How many users a share can have at once: the peak of its clients or users, stages
    included (a level between whole numbers rounded up). The open model has no numbered
    users: its arrivals are the engine's (0)."""
    if load.model is LoadModel.OPEN:
        return 0
    return math.ceil(load.peak)


@dataclass(frozen=True)
class AgentShare:
    agent_id: str
    engines: tuple[EngineShare, ...]

    @property
    def load(self) -> Load:
        """The agent's whole share: the sum of its engines' shares."""
        return combine([e.load for e in self.engines])

    @property
    def max_requests(self) -> int:
        return sum(e.max_requests for e in self.engines)

    def scenario_load(self, index: int) -> Load | None:
        """The agent's share of one scenario (the plan's `index`-th); None: idle in it."""
        parts = [s.load for e in self.engines if index < len(e.scenarios) and (s := e.scenarios[index])]
        return combine(parts) if parts else None


def split_over_engines(load: Load, max_requests: int, agents: list[tuple[str, int]]) -> list[AgentShare]:
    """Shares for (agent_id, cores) pairs, one engine per core (at most
    MAX_ENGINES_PER_AGENT); agents with no work are left out."""
    slots = _slots(agents)
    parts = split_load(load, max_requests, [1] * len(slots))
    shares: dict[str, list[EngineShare]] = {}
    first_user = 0
    for agent_id, part in zip(slots, parts):
        if part is not None:
            shares.setdefault(agent_id, []).append(EngineShare(*part, first_user=first_user))
            first_user += users_of(part[0])
    return [AgentShare(agent_id, tuple(shares[agent_id])) for agent_id, _ in agents if agent_id in shares]


def split_scenarios(scenarios: Sequence[tuple[Load, int]], agents: list[tuple[str, int]]) -> list[AgentShare]:
    """Shares of several scenarios ((load, budget) each, in the plan's order): each split
    exactly over all engine slots on its own, so its totals add up fleet-wide. `split_exact`
    gives remainders to the first slots, so each scenario's slots are rotated by the peaks
    of the scenarios before it: a 3-client and a 2-client scenario load five engines, not
    the first three twice. Users are numbered fleet-wide and disjoint across scenarios."""
    slots = _slots(agents)
    if not slots:
        return []
    per_slot: list[list[ScenarioShare | None]] = [[] for _ in slots]
    first_user = offset = 0
    for load, budget in scenarios:
        parts = split_load(load, budget, [1] * len(slots))
        for slot, shares in enumerate(per_slot):
            part = parts[(slot - offset) % len(slots)]
            shares.append(None if part is None else ScenarioShare(*part, first_user=first_user))
            first_user += users_of(part[0]) if part else 0
        offset = (offset + math.ceil(load.peak)) % len(slots)
    engines: dict[str, list[EngineShare]] = {}
    for agent_id, shares in zip(slots, per_slot, strict=True):
        if any(shares):
            engines.setdefault(agent_id, []).append(EngineShare(IDLE_LOAD, scenarios=tuple(shares)))
    return [AgentShare(agent_id, tuple(engines[agent_id])) for agent_id, _ in agents if agent_id in engines]


def _slots(agents: list[tuple[str, int]]) -> list[str]:
    """One engine slot per core of each agent (at least one, at most MAX_ENGINES_PER_AGENT)."""
    return [agent_id for agent_id, cores in agents for _ in range(min(max(1, cores), MAX_ENGINES_PER_AGENT))]


def combine(parts: list[Load]) -> Load:
    """Adds loads of the same model (whole numbers and rates add, stage targets add)."""
    first = parts[0]
    return replace(
        first,
        clients=sum(p.clients for p in parts),
        users=sum(p.users for p in parts),
        rate=sum(p.rate for p in parts),
        spawn_rate=sum(p.spawn_rate for p in parts),
        max_connections=sum(p.max_connections for p in parts),
        stages=tuple(Stage(s.duration_s, sum(p.stages[i].target for p in parts)) for i, s in enumerate(first.stages)),
    )


def barrier_start_ms(now_ms: int, interval_ms: int, lead_ms: int = DEFAULT_BARRIER_LEAD_MS) -> int:
    """The first interval boundary at least `lead_ms` after `now_ms`."""
    earliest = now_ms + lead_ms
    return -(-earliest // interval_ms) * interval_ms
