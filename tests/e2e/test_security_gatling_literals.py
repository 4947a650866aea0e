"""The Gatling driver dials exactly the addresses the agent checked, IP literals included
(issue 28, B1): glibc read `127.0.0.010` as 127.0.0.8 (allowed) and Java as 127.0.0.10 (not
allowed), and JobSimulation let Java resolve every literal itself.

A real Gatling JVM (agent/gatling, `make gatling`) against two nginx on loopback, on the same
port: 127.0.0.8 (what the agent checked) and 127.0.0.10 (what Java reads). Nothing here is sent
outside 127.0.0.0/8; the forms whose Java reading is public (`0177.0.0.1` is 177.0.0.1) are
tested by refusal only (tests/agent/test_guard.py, tests/controller/plan/test_plan_hostile.py).
"""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.request

import pytest

from loadfleet.agent.errors import EngineError
from loadfleet.agent.gatling import GatlingProcess, find_gatling
from loadfleet.agent.guard import LoadPolicy
from loadfleet.agent.job import JobRunner, Outcome
from loadfleet.targets.nginx import NginxServer
from loadfleet.v1 import agent_pb2, job_pb2
from loadfleet.wire.allowlist import AllowList
from support.procs import free_port

pytestmark = pytest.mark.e2e

CHECKED, JAVA_READING = "127.0.0.8", "127.0.0.10"
STUB_STATUS = "        location = /lf-status { stub_status; }\n"


def port_free_on_both() -> int:
    """A port free on both addresses: an alias replaces the address, never the port."""
    for _ in range(20):
        port = free_port(CHECKED)
        with socket.socket() as s:
            try:
                s.bind((JAVA_READING, port))
            except OSError:
                continue
        return port
    raise AssertionError(f"no port free on both {CHECKED} and {JAVA_READING}")


@pytest.fixture
def servers(docroot, tmp_path):
    """nginx on the checked address and on Java's reading, same port, each counting connections."""
    port = port_free_on_both()
    started = {}
    try:
        for host in (CHECKED, JAVA_READING):
            server = NginxServer(host, port, docroot, tmp_path / "nginx", host, extra_conf=STUB_STATUS)
            server.start()
            started[host] = server
        yield started
    finally:
        for server in started.values():
            server.stop()


def load_requests(server: NginxServer) -> int:
    """Requests nginx logged, but for the status requests of `accepted_connections`."""
    return sum(1 for line in server.access_log.read_text().splitlines() if "/lf-status" not in line)


def accepted_connections(server: NginxServer) -> int:
    """Connections nginx accepted so far (this status request included)."""
    with urllib.request.urlopen(f"http://{server.host}:{server.port}/lf-status", timeout=5) as response:
        return int(response.read().decode().splitlines()[2].split()[0])


def job(url: str, addresses: list[str]) -> job_pb2.JobSpec:
    return job_pb2.JobSpec(
        job_id="literal",
        driver=job_pb2.DRIVER_GATLING,
        targets=[job_pb2.Target(url=url, weight=1, addresses=addresses)],
        requests=[job_pb2.RequestSpec(name="index", method="GET", path="/index.html", weight=1)],
        load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=1)),
        connect_timeout_ms=2000,
        request_timeout_ms=5000,
        interval_ms=1000,
        # After the JVM's start-up: 4-9 s here, 16 s while other suites ran on the same 2 cores
        # (then the 3 s that remained of the load saw no request).
        start_at_ms=int((time.time() + 20) * 1000),
        duration_ms=4000,
    )


async def run_jvm(spec: job_pb2.JobSpec) -> tuple[int, list]:
    """JobSimulation on `spec` exactly as given (no guard): its exit status and events."""
    gatling = await GatlingProcess.spawn(find_gatling(), spec)
    try:
        await gatling.wait_ready()
        events = []
        while (event := await asyncio.wait_for(gatling.next_event(), 60)) is not None:
            events.append(event)
        return await gatling.wait(), events
    finally:
        gatling.kill()


@pytest.mark.parametrize("host", [JAVA_READING, "[::1]"])
def test_a_literal_target_is_dialled_at_the_checked_address_not_at_javas_reading(servers, host):
    """The addresses in the job are the only ones Gatling connects to, whatever its own reading
    of the URL's host: here the URL says 127.0.0.10 (or ::1, where nothing listens on the
    port) and the agent checked 127.0.0.8."""
    checked, forbidden = servers[CHECKED], servers[JAVA_READING]
    before = accepted_connections(forbidden)
    code, events = asyncio.run(run_jvm(job(f"http://{host}:{checked.port}", [f"{CHECKED}:{checked.port}"])))
    assert code == 0, events
    assert load_requests(forbidden) == 0, "Gatling dialled its own reading of the URL"
    assert load_requests(checked) > 0, "Gatling produced load at the checked address"
    assert accepted_connections(forbidden) - before == 1, "only the status request reached 127.0.0.10"


def test_a_target_without_checked_addresses_stops_the_jvm_before_any_load(servers):
    """Fail closed: with nothing checked, JobSimulation does not fall back to resolving the URL."""
    forbidden = servers[JAVA_READING]
    with pytest.raises(EngineError, match="has no checked addresses"):
        asyncio.run(run_jvm(job(f"http://{JAVA_READING}:{forbidden.port}", [])))
    assert load_requests(forbidden) == 0


def test_the_agent_refuses_a_non_canonical_literal_even_if_its_controller_sent_it(servers):
    """The audit's reproduction, through the agent's JobRunner (as a rogue or old controller
    would assign it): `127.0.0.010` is 127.0.0.8 to glibc, on the list; the job is refused
    and neither server sees a connection."""
    port = servers[CHECKED].port
    before = {host: accepted_connections(server) for host, server in servers.items()}
    sent: list[agent_pb2.AgentMessage] = []
    policy = LoadPolicy(allow=AllowList.parse(f"{CHECKED}/32"))
    spec = job(f"http://127.0.0.010:{port}", [])

    async def go():
        runner = JobRunner(agent_pb2.Assignment(spec=spec), "/nonexistent-engine", sent.append, policy=policy)
        return await asyncio.wait_for(runner.run(), 120)

    outcome = asyncio.run(go())
    [status] = [m.job_status for m in sent if m.WhichOneof("body") == "job_status"][-1:]
    assert outcome is Outcome.FAILED and status.state == agent_pb2.JOB_STATE_FAILED
    assert "'127.0.0.010' is an IPv4 address in a non-canonical form (glibc reads it as 127.0.0.8)" in status.message
    for host, server in servers.items():
        assert load_requests(server) == 0, host
        assert accepted_connections(server) - before[host] == 1, f"{host} saw a connection"
