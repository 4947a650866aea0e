"""Hostile plans sent straight to a real controller's StartRun (issue 28, B2): refused with
INVALID_ARGUMENT and the problem's place, while the controller keeps serving its agents and
operators. Before, the 11-byte `a: &a [*a]` froze the controller's event loop for good."""

from __future__ import annotations

import time

import grpc
import pytest

from loadfleet.v1 import run_pb2, run_pb2_grpc
from support.cluster import Cluster

VALID = """duration_s: 1
targets: [{url: "http://127.0.0.2:1"}]
workload: {requests: [{path: /}]}
load: {model: closed, clients: 1}
"""

# (plan text, the problem's path)
RECURSIVE = [
    ("a: &a [*a]", "a[0]"),
    ("x: &x [1, [2, *x]]\n", "x[1][1]"),
    ("a: &a {b: *a}\n", "a.b"),
    (VALID + "agents: {labels: &l {x: *l}}\n", "agents.labels.x"),
]


def start_run_problems(address: str, plan_yaml: str) -> list[tuple[str, str]]:
    """StartRun as a raw client sends it (no CLI in between): the problems it is refused with."""
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as caught:
        run_pb2_grpc.RunServiceStub(channel).StartRun(run_pb2.StartRunRequest(plan_yaml=plan_yaml), timeout=10)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value
    [problems] = [v for k, v in caught.value.trailing_metadata() if k == "loadfleet-plan-problems-bin"]
    return [(p.path, p.message) for p in run_pb2.PlanProblems.FromString(problems).problems]


def test_recursive_aliases_are_refused_and_the_controller_keeps_serving(cluster: Cluster):
    cluster.add_agent("a1", 1)
    cluster.wait_for_agents(1)
    for plan_yaml, path in RECURSIVE:
        started = time.monotonic()
        problems = start_run_problems(cluster.address, plan_yaml)
        assert time.monotonic() - started < 5
        assert [p for p, _ in problems] == [path] and "recursive alias" in problems[0][1], problems
        listed = cluster.loadfleet("agents", timeout=10)
        assert listed.returncode == 0 and "a1" in listed.stdout, listed.stderr
    assert cluster.controller.poll() is None, "the controller is still running"
    assert "a1" in cluster.loadfleet("agents", "--json", timeout=10).stdout, "the agent kept its session"
