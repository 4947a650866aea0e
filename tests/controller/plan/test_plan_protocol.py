"""`targets[].protocol` and `targets[].max_streams` (plan/protocol.py): parsed with their
defaults, each problem named by its field, and carried into the JobSpec (rpc/targetconvert.py)."""

from __future__ import annotations

import pytest
import yaml

from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import split_over_engines
from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.controller.plan.protocol import DEFAULT_MAX_STREAMS, HttpProtocol
from loadfleet.controller.rpc.jobconvert import assignment_to_proto
from loadfleet.v1 import job_pb2


def plan_text(*targets: dict, driver: str = "engine") -> str:
    doc = {
        "driver": driver,
        "duration_s": 5,
        "targets": list(targets),
        "workload": {"requests": [{"name": "page", "path": "/"}]},
        "load": {"model": "closed", "clients": 4},
    }
    return yaml.safe_dump(doc)


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(PlanError) as caught:
        parse_plan(text)
    return [(p.path, p.message) for p in caught.value.problems]


def test_protocols_parse_with_their_defaults_and_round_trip():
    plan = parse_plan(
        plan_text(
            {"url": "http://127.0.0.2:80"},
            {"url": "https://127.0.0.2:443", "protocol": "h2", "max_streams": 50},
            {"url": "http://127.0.0.3:80", "protocol": "h2c"},
            {"url": "https://127.0.0.3:443", "protocol": "auto"},
        )
    )
    assert [t.protocol for t in plan.targets] == [
        HttpProtocol.HTTP1,
        HttpProtocol.H2,
        HttpProtocol.H2C,
        HttpProtocol.AUTO,
    ]
    assert [t.max_streams for t in plan.targets] == [DEFAULT_MAX_STREAMS, 50, DEFAULT_MAX_STREAMS, DEFAULT_MAX_STREAMS]
    assert parse_plan(plan.to_yaml()) == plan


@pytest.mark.parametrize(
    "target, driver, path, words",
    [
        ({"url": "https://127.0.0.2:443", "protocol": "h2c"}, "engine", "targets[0].protocol", "is https (use h2)"),
        ({"url": "http://127.0.0.2:80", "protocol": "h2"}, "engine", "targets[0].protocol", "h2 needs TLS"),
        ({"url": "http://127.0.0.2:80", "protocol": "auto"}, "engine", "targets[0].protocol", "auto needs TLS"),
        ({"url": "http://127.0.0.2:80", "protocol": "h2c"}, "gatling", "targets[0].protocol", "cannot load h2c"),
        ({"url": "http://127.0.0.2:80", "max_streams": 5}, "engine", "targets[0].max_streams", "HTTP/2 only"),
        ({"url": "http://127.0.0.2:80", "protocol": "h3"}, "engine", "targets[0].protocol", "is not one of"),
        ({"url": "http://127.0.0.2:80", "protocol": "h2c", "max_streams": 0}, "engine", "targets[0].max_streams", ""),
        (
            {"url": "http://127.0.0.2:80", "protocol": "h2c", "max_streams": 1001},
            "engine",
            "targets[0].max_streams",
            "",
        ),
    ],
)
def test_each_problem_names_its_field(target, driver, path, words):
    found = problems(plan_text(target, driver=driver))
    assert any(p == path and words in m for p, m in found), found


def test_the_job_spec_carries_protocol_and_streams():
    plan = parse_plan(
        plan_text(
            {"url": "http://127.0.0.2:80"},
            {"url": "https://127.0.0.2:443", "protocol": "h2", "max_streams": 50},
            {"url": "http://127.0.0.3:80", "protocol": "h2c"},
            {"url": "https://127.0.0.3:443", "protocol": "auto"},
        )
    )
    shares = split_over_engines(plan.load, plan.max_requests, [("a", 1)])
    assignment = JobAssignment(job_id="r/s", plan=plan, engines=shares[0].engines, start_at_ms=2**41)
    spec = assignment_to_proto(assignment).assignment.spec
    assert [(t.protocol, t.max_streams) for t in spec.targets] == [
        (job_pb2.HTTP_PROTOCOL_HTTP1, 0),
        (job_pb2.HTTP_PROTOCOL_H2, 50),
        (job_pb2.HTTP_PROTOCOL_H2C, DEFAULT_MAX_STREAMS),
        (job_pb2.HTTP_PROTOCOL_AUTO, DEFAULT_MAX_STREAMS),
    ]


@pytest.mark.parametrize("protocol", ["h2", "auto"])
def test_the_gatling_driver_takes_h2_over_tls(protocol):
    # Gatling's enableHttp2 negotiates h2 by ALPN: https targets pass, h2c stays refused above.
    plan = parse_plan(plan_text({"url": "https://127.0.0.2:443", "protocol": protocol}, driver="gatling"))
    assert [t.protocol.value for t in plan.targets] == [protocol]
