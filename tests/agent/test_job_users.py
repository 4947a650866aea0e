"""The users of an agent's engines are numbered on from the agent's first user (JobSpec.first_user),
exactly as the controller's scheduler numbered them, so ${user} is unique across the fleet."""

import pytest

from loadfleet.agent.job import engine_specs, users_of
from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import split_over_engines
from loadfleet.controller.model.load import Load, Stage
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.rpc.jobconvert import assignment_to_proto
from loadfleet.v1 import agent_pb2, job_pb2


def closed(clients, *targets):
    return job_pb2.LoadShare(
        closed=job_pb2.ClosedModel(clients=clients), stages=[job_pb2.Stage(duration_ms=1, target=t) for t in targets]
    )


def test_each_engine_starts_after_the_users_of_the_engines_before_it():
    share = agent_pb2.Assignment(
        spec=job_pb2.JobSpec(job_id="j", first_user=100),
        engines=[agent_pb2.EngineShare(load=closed(3)), agent_pb2.EngineShare(load=closed(1, 4.5))],
    )
    specs = engine_specs(share)
    assert [s.first_user for s in specs] == [100, 103]
    assert share.spec.first_user == 100, "the assignment is left as it was"


@pytest.mark.parametrize(
    "load, users",
    [
        (closed(3), 3),
        (closed(1, 4.5, 0), 5),  # ramps to 4.5 clients: room for 5
        (job_pb2.LoadShare(users=job_pb2.UsersModel(users=7)), 7),
        (job_pb2.LoadShare(open=job_pb2.OpenModel(rate_per_s=50)), 0),
        (job_pb2.LoadShare(), 0),
    ],
)
def test_users_of_a_share(load, users):
    assert users_of(load) == users


PLAN = """
duration_s: 5
targets: [{url: "http://127.0.0.2:8080"}]
workload: {requests: [{path: "/u/${user}"}]}
load: {model: closed, clients: 23, stages: [{duration_s: 2, target: 41}]}
"""


def test_the_agents_numbering_is_the_controllers():
    """Every engine of every agent gets the first user the controller's split gave it, and
    their ranges tile 0..n without a gap or an overlap."""
    plan = parse_plan(PLAN)
    shares = split_over_engines(plan.load, 0, [("a", 3), ("b", 2), ("c", 4)])
    given, ranges = [], []
    for share in shares:
        assignment = JobAssignment(job_id="r/s", plan=plan, engines=share.engines, start_at_ms=2**41)
        specs = engine_specs(assignment_to_proto(assignment).assignment)
        given += [s.first_user for s in specs]
        ranges += [(s.first_user, s.first_user + users_of(s.load)) for s in specs]
    assert given == [e.first_user for s in shares for e in s.engines]
    assert [low for low, _ in ranges] == [0] + [high for _, high in ranges[:-1]]
    assert ranges[-1][1] >= Load("closed", clients=23, stages=(Stage(2, 41),)).peak
