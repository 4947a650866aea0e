"""A job with scenarios on this agent: each engine's spec from its scenario shares.

The controller splits each scenario's load over the engine slots (EngineShare.scenarios);
an engine runs every scenario of the job, a scenario it has no share of idle (its model at
level 0), so a later `scenario_adjust` can hand it load without a new spec.
"""

from __future__ import annotations

import math

from loadfleet.v1 import agent_pb2, job_pb2


def users_of(load: job_pb2.LoadShare) -> int:
    """How many users a share can have at once: the peak of its clients or users, stages
    included, rounded up (the controller's scheduler.users_of); the open model's arrivals
    are not numbered here (0)."""
    model = load.WhichOneof("model")
    if model == "closed":
        start = load.closed.clients
    elif model == "users":
        start = load.users.users
    else:
        return 0
    peak: float = max([float(start), *(s.target for s in load.stages)])
    return math.ceil(peak)


def idle_share(load: job_pb2.LoadShare) -> job_pb2.LoadShare:
    """The same model and stage timing at level 0: no load, and no user numbered."""
    idle = job_pb2.LoadShare()
    idle.CopyFrom(load)
    model = idle.WhichOneof("model")
    if model == "closed":
        idle.closed.clients = 0
    elif model == "open":
        idle.open.rate_per_s = 0
    elif model == "users":
        idle.users.users = 0
    for stage in idle.stages:
        stage.target = 0
    return idle


def shares_by_scenario(share: agent_pb2.EngineShare) -> dict[int, agent_pb2.ScenarioShare]:
    return {s.scenario: s for s in share.scenarios}


def scenario_engine_spec(base: job_pb2.JobSpec, share: agent_pb2.EngineShare) -> job_pb2.JobSpec:
    """The assignment's spec with each scenario's load, max_requests and first_user from the
    engine's share of it (numbered by the controller, so `${user}` is unique fleet-wide)."""
    spec = job_pb2.JobSpec()
    spec.CopyFrom(base)
    shares = shares_by_scenario(share)
    for index, scenario in enumerate(spec.scenarios):
        mine = shares.get(index)
        if mine is None:
            scenario.job.load.CopyFrom(idle_share(scenario.job.load))
            scenario.job.max_requests = 0
            continue
        scenario.job.load.CopyFrom(mine.load)
        scenario.job.max_requests = mine.max_requests
        scenario.job.first_user = mine.first_user
    return spec


def changed_scenarios(
    spec: job_pb2.JobSpec, old: agent_pb2.EngineShare, new: agent_pb2.EngineShare
) -> list[agent_pb2.ScenarioShare]:
    """The scenario shares that differ from `old` in `new`, one per changed scenario; a
    scenario that lost its share comes back idle (level 0, budget unchanged)."""
    before, after = shares_by_scenario(old), shares_by_scenario(new)
    changed = []
    for index, scenario in enumerate(spec.scenarios):
        now = after.get(index)
        if now is None:
            if index in before:
                changed.append(agent_pb2.ScenarioShare(scenario=index, load=idle_share(scenario.job.load)))
        elif before.get(index) != now:
            changed.append(now)
    return changed


def scenario_index(spec: job_pb2.JobSpec) -> dict[str, int]:
    """A scenario's position by its name (the stats rows carry the name)."""
    return {s.name: i for i, s in enumerate(spec.scenarios)}
