"""Locked by default, on real parts: a controller process serving TLS (client certificates
or tokens), agent processes, the CLI, raw gRPC clients over real TLS sockets, and nginx.
Every refusal of issue 13 has a test here; what works with the right credentials is shown
next to it, so that no refusal passes for a broken setup."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from loadfleet.targets.nginx import NginxServer
from loadfleet.v1 import agent_pb2, agent_pb2_grpc, run_pb2, run_pb2_grpc
from support.cluster import Cluster, write_plan
from support.pki import OPERATOR, Pki, make_pki, make_tokens
from support.procs import free_port, program, wait_for_port

SECRET = "Bearer s3cret-never-stored"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def foreign(tmp_path_factory) -> Pki:
    """Another CA, with certificates of the same names."""
    return make_pki(tmp_path_factory.mktemp("foreign-pki"))


@pytest.fixture
def secure(processes, tmp_path, pki) -> Cluster:
    """A controller requiring client certificates; the CLI as operator alice."""
    return Cluster(
        processes, tmp_path, controller_args=pki.server_args(), client_args=pki.client_args("operator", OPERATOR)
    )


def agent_args(pki: Pki, name: str) -> tuple[str, ...]:
    return pki.client_args("agent", name)


def loadfleet(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([program("loadfleet"), *args], capture_output=True, text=True, timeout=timeout)


def agents_listed(cluster: Cluster) -> dict[str, dict]:
    result = cluster.loadfleet("agents", "--json")
    assert result.returncode == 0, result.stderr
    return {a["agentId"]: a for a in json.loads(result.stdout)}


def wait_for_log(proc, text: str, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in proc.log_path.read_text():
        assert time.monotonic() < deadline, f"{text!r} not in {proc.log_path.name}: {proc.log_path.read_text()[-800:]}"
        time.sleep(0.2)


def tls_channel(address: str, pki: Pki, role: str | None = None, name: str = "", *, ca: Path | None = None):
    """A raw gRPC channel over TLS, with a client certificate when `role` is given."""
    key = cert = None
    if role:
        key, cert = pki.key(role, name).read_bytes(), pki.cert(role, name).read_bytes()
    credentials = grpc.ssl_channel_credentials((ca or pki.ca).read_bytes(), key, cert)
    return grpc.secure_channel(address, credentials)


def connect_as(channel, agent_id: str) -> grpc.RpcError:
    """Opens an agent session with a Hello and returns how the controller ended it."""
    hello = agent_pb2.AgentMessage(hello=agent_pb2.Hello(agent_id=agent_id, hostname="test", cores=1))
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect(iter([hello]), timeout=5)
    with pytest.raises(grpc.RpcError) as caught:
        for _ in call:
            pass
    return caught.value


def plan_for(tmp_path, url: str, **extra) -> Path:
    extra.setdefault("agents", {"wait_s": 5})
    return write_plan(
        tmp_path / "plan.yaml",
        name="secure",
        duration_s=2,
        targets=[{"url": url}],
        workload={
            "requests": [
                {"name": "page", "path": "/manifest.json", "headers": {"Authorization": SECRET, "Accept": "*/*"}}
            ]
        },
        load={"model": "closed", "clients": 2},
        **extra,
    )


# ---------------------------------------------------------------- certificates


def test_certified_agents_and_operators_run_a_plan_and_no_credential_is_stored(secure, pki, webs, tmp_path):
    secure.add_agent(None, 1, *agent_args(pki, "a1"), name="a1")  # its id comes from its certificate
    secure.wait_for_agents(1)
    assert set(agents_listed(secure)) == {"a1"}
    run = secure.start_run(plan_for(tmp_path, webs[0].url))
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    summary = json.loads(out)
    assert [a["name"] for a in summary["agents"]] == ["a1"]
    assert summary["total"]["figures"]["requests"] == webs[0].server.access_log_lines() > 0
    run_dir = secure.runs_dir / summary["run_id"]
    stored = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"plan.yaml", "summary.json", "report.html"} <= {p.name for p in stored}
    assert not [p for p in stored if b"s3cret" in p.read_bytes()], "a credential reached the run directory"
    assert "Authorization: <redacted>" in (run_dir / "plan.yaml").read_text()
    log = secure.controller.log_path.read_text()
    assert re.search(r"operator 'alice' \(ipv4:127\.0\.0\.1:\d+\) calls /loadfleet\.v1\.RunService/StartRun", log)


def test_a_client_without_a_certificate_is_refused_at_the_handshake(secure, pki, tmp_path):
    # The client trusts the controller and shows nothing.
    with tls_channel(secure.address, pki) as channel, pytest.raises(grpc.RpcError) as caught:
        run_pb2_grpc.RunServiceStub(channel).ListRuns(run_pb2.ListRunsRequest(), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    # Plaintext.
    with grpc.insecure_channel(secure.address) as channel, pytest.raises(grpc.RpcError) as caught:
        run_pb2_grpc.RunServiceStub(channel).ListRuns(run_pb2.ListRunsRequest(), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    result = loadfleet("runs", "--controller", secure.address, "--tls-ca", str(pki.ca))
    assert result.returncode == 1 and "cannot reach the controller" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    # An agent without a certificate never joins.
    secure.add_agent("a2", 1, "--tls-ca", str(pki.ca))
    wait_for_log(secure.agents["a2"], "unreachable")
    assert "a2" not in agents_listed(secure)


def test_a_certificate_of_another_ca_is_refused_both_ways(secure, pki, foreign):
    # The client shows a certificate the controller's CA did not sign.
    with (
        tls_channel(secure.address, foreign, "operator", OPERATOR, ca=pki.ca) as channel,
        pytest.raises(grpc.RpcError) as caught,
    ):
        run_pb2_grpc.RunServiceStub(channel).ListRuns(run_pb2.ListRunsRequest(), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    # The client trusts another CA: it does not accept the controller.
    result = loadfleet("runs", "--controller", secure.address, *foreign.client_args("operator", OPERATOR))
    assert result.returncode == 1 and "cannot reach the controller" in result.stderr
    # The same calls with the right CA work.
    with tls_channel(secure.address, pki, "operator", OPERATOR) as channel:
        run_pb2_grpc.RunServiceStub(channel).ListRuns(run_pb2.ListRunsRequest(), timeout=5)


def test_an_agent_certificate_may_not_start_stop_or_list_runs(secure, pki, webs, tmp_path):
    plan = plan_for(tmp_path, webs[0].url)
    as_agent = agent_args(pki, "a1")
    for command in (["run", str(plan)], ["runs"], ["agents"], ["stop", "some-run"], ["status", "some-run"]):
        result = loadfleet(*command, "--controller", secure.address, *as_agent)
        assert result.returncode == 2, (command, result.stderr)
        assert "agent 'a1' may not call" in result.stderr and "Traceback" not in result.stderr
    assert loadfleet("runs", "--controller", secure.address, "--json", *as_agent).returncode == 2
    assert webs[0].server.access_log_lines() == 0


def test_an_operator_certificate_may_not_open_an_agent_session(secure, pki):
    with tls_channel(secure.address, pki, "operator", OPERATOR) as channel:
        error = connect_as(channel, OPERATOR)
    assert error.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "operator 'alice' may not call Connect" in error.details()
    assert agents_listed(secure) == {}


def test_an_agent_opens_a_session_only_under_its_own_name(secure, pki):
    with tls_channel(secure.address, pki, "agent", "a1") as channel:
        error = connect_as(channel, "a2")
    assert error.code() is grpc.StatusCode.PERMISSION_DENIED and "only as 'a1'" in error.details()
    assert agents_listed(secure) == {}
    result = subprocess.run(
        [program("loadfleet-agent"), "--controller", secure.address, "--id", "a2", *agent_args(pki, "a1")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "credentials are for agent 'a1'" in result.stderr


def test_a_second_session_for_a_live_agent_id_is_refused_and_the_first_stays(secure, pki):
    secure.add_agent(None, 1, *agent_args(pki, "a1"), name="a1")
    secure.wait_for_agents(1)
    seen = agents_listed(secure)["a1"]["lastSeenMs"]
    with tls_channel(secure.address, pki, "agent", "a1") as channel:
        error = connect_as(channel, "a1")
    assert error.code() is grpc.StatusCode.ALREADY_EXISTS and "live session already" in error.details()
    # A second agent process with the same certificate is refused again and again.
    secure.add_agent(None, 1, *agent_args(pki, "a1"), name="a1-twin")
    wait_for_log(secure.agents["a1-twin"], "ALREADY_EXISTS")
    deadline = time.monotonic() + 5  # the first session's next heartbeat (one a second) shows it alive
    while (first := agents_listed(secure)["a1"])["lastSeenMs"] <= seen and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first["state"] == "AGENT_STATE_IDLE" and first["lastSeenMs"] > seen, "the first session was evicted"
    assert secure.agents["a1"].log_path.read_text().count("connected to") == 1


# ---------------------------------------------------------------- tokens


@pytest.fixture
def tokens(tmp_path):
    return make_tokens(tmp_path / "tokens")


@pytest.fixture
def token_cluster(processes, tmp_path, pki, tokens) -> Cluster:
    return Cluster(
        processes,
        tmp_path,
        controller_args=(
            "--tls-cert",
            str(pki.cert("controller")),
            "--tls-key",
            str(pki.key("controller")),
            "--token-file",
            str(tokens.server_file),
        ),
        client_args=("--tls-ca", str(pki.ca), "--token-file", str(tokens.client_files[OPERATOR])),
    )


def test_tokens_admit_agents_and_operators_by_name_and_role(token_cluster, pki, tokens):
    token_cluster.add_agent(None, 1, "--tls-ca", str(pki.ca), "--token-file", str(tokens.client_files["a1"]), name="a1")
    token_cluster.wait_for_agents(1)
    assert set(agents_listed(token_cluster)) == {"a1"}
    address, ca = token_cluster.address, str(pki.ca)
    for token_file, message in (
        (tokens.client_files["wrong"], "not one of this controller's"),
        (tokens.client_files["a2"], "agent 'a2' may not call ListRuns"),
    ):
        result = loadfleet("runs", "--controller", address, "--tls-ca", ca, "--token-file", str(token_file))
        assert result.returncode == 2 and message in result.stderr, result.stderr
    result = loadfleet("runs", "--controller", address, "--tls-ca", ca)
    assert result.returncode == 2 and "needs a token" in result.stderr
    # A token works only over TLS: the client never sends it in the clear, the controller never serves plaintext.
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as caught:
        run_pb2_grpc.RunServiceStub(channel).ListRuns(
            run_pb2.ListRunsRequest(), timeout=5, metadata=(("authorization", "Bearer x"),)
        )
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    a2_token = tokens.client_files["a2"].read_text().split()[2]
    credentials = grpc.composite_channel_credentials(
        grpc.ssl_channel_credentials(pki.ca.read_bytes()), grpc.access_token_call_credentials(a2_token)
    )
    with grpc.secure_channel(address, credentials) as channel:
        error = connect_as(channel, "a1")
    assert error.code() is grpc.StatusCode.PERMISSION_DENIED and "only as 'a2'" in error.details()


# ---------------------------------------------------------------- starting the controller


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda pki, tokens, port: ["--listen", f"0.0.0.0:{port}"], "refusing to listen on 0.0.0.0"),
        (lambda pki, tokens, port: ["--listen", f"[::]:{port}"], "refusing to listen on [::]"),
        (
            lambda pki, tokens, port: [
                "--listen",
                f"0.0.0.0:{port}",
                "--tls-cert",
                str(pki.cert("controller")),
                "--tls-key",
                str(pki.key("controller")),
            ],
            "without TLS and authentication",
        ),
        (lambda pki, tokens, port: ["--token-file", str(tokens.server_file)], "need TLS"),
        (
            lambda pki, tokens, port: [
                "--tls-cert",
                str(pki.cert("controller")),
                "--tls-key",
                str(pki.key("controller")),
                "--tls-ca",
                str(pki.ca),
                "--token-file",
                str(tokens.server_file),
            ],
            "not both",
        ),
        (lambda pki, tokens, port: ["--tls-cert", str(pki.cert("controller"))], "go together"),
        (
            lambda pki, tokens, port: [
                "--tls-cert",
                str(pki.cert("controller")),
                "--tls-key",
                str(pki.key("controller")),
                "--token-file",
                str(tokens.client_files["wrong"]),
            ],
            "expected `role name token`",
        ),
    ],
)
def test_an_unsafe_controller_refuses_to_start_with_one_line(pki, tokens, make_args, message):
    result = loadfleet("controller", *make_args(pki, tokens, free_port()), timeout=30)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_weak_or_misrolled_token_file_is_refused(pki, tmp_path):
    for line, message in (
        ("operator alice short", "at least 32 characters"),
        (f"controller c {'x' * 40}", "agent or operator"),
        (f"agent a1 {'x' * 40}\nagent a1 {'y' * 40}", "listed twice"),
        (f"agent a1 {'x' * 40}", "other users may read it (mode 0644): chmod o-rwx"),
    ):
        (tmp_path / "tokens").write_text(line + "\n")
        (tmp_path / "tokens").chmod(0o644 if "other users" in message else 0o600)
        result = loadfleet(
            "controller",
            "--tls-cert",
            str(pki.cert("controller")),
            "--tls-key",
            str(pki.key("controller")),
            "--token-file",
            str(tmp_path / "tokens"),
            timeout=30,
        )
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_insecure_serves_beyond_loopback_and_says_so(processes):
    port = free_port("0.0.0.0")
    proc = processes.start(
        "insecure",
        [
            program("loadfleet"),
            "controller",
            "--listen",
            f"0.0.0.0:{port}",
            "--insecure",
            "--runs-dir",
            "/nonexistent-runs",
        ],
    )
    wait_for_port("127.0.0.1", port)
    wait_for_log(proc, "--insecure: anyone who reaches")


# ---------------------------------------------------------------- confined plans


def start_run_raw(address: str, pki: Pki, plan_yaml: str) -> list[tuple[str, str]]:
    """StartRun as a hostile operator would call it (no CLI resolving files first): the problems."""
    with tls_channel(address, pki, "operator", OPERATOR) as channel, pytest.raises(grpc.RpcError) as caught:
        run_pb2_grpc.RunServiceStub(channel).StartRun(run_pb2.StartRunRequest(plan_yaml=plan_yaml), timeout=10)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    [problems] = [v for k, v in caught.value.trailing_metadata() if k == "loadfleet-plan-problems-bin"]
    return [(p.path, p.message) for p in run_pb2.PlanProblems.FromString(problems).problems]


CONTROLLER_FILE_PLAN = """
duration_s: 1
targets: [{url: "http://127.0.0.1:1"}]
load: {model: closed, clients: 1}
"""


@pytest.mark.parametrize(
    "extra, path, text",
    [
        ("workload: {manifest: /etc/passwd}\n", "workload.manifest", "reads no files"),
        ("workload: {manifest: ../../controller/secrets.json}\n", "workload.manifest", "reads no files"),
        (
            "workload: {requests: [{path: /}]}\nsinks: {influxdb: {url: 'http://127.0.0.1:1', token_env: HOME}}\n",
            "sinks.influxdb.token_env",
            "LOADFLEET_INFLUX_TOKEN",
        ),
        (
            "workload: {requests: [{path: /}]}\nsinks: {influxdb: {url: 'http://127.0.0.1:1'}}\n",
            "sinks.influxdb",
            "--allow-plan-influx",
        ),
        ("driver: gatling\ngatling: {project: ../../etc, simulation: a.B}\n", "gatling.project", "relative"),
    ],
)
def test_a_plan_naming_a_controller_file_or_variable_is_refused(secure, pki, extra, path, text):
    problems = start_run_raw(secure.address, pki, CONTROLLER_FILE_PLAN + extra)
    assert [p for p, _ in problems] == [path] and text in problems[0][1], problems


# ---------------------------------------------------------------- allow-lists


def test_a_plan_no_agent_may_run_is_refused_at_start_run(cluster, webs, tmp_path):
    cluster.add_agent("a1", 1, "--allow-targets", "127.0.0.2")
    cluster.wait_for_agents(1)
    outside = webs[1]  # on 127.0.0.3
    result = cluster.loadfleet("run", str(plan_for(tmp_path, outside.url)))
    assert result.returncode == 2, result.stderr
    assert "targets[0].url: no agent the plan selects may load" in result.stderr
    assert "a1 allows 127.0.0.2" in result.stderr
    assert outside.server.access_log_lines() == 0
    assert agents_listed(cluster)["a1"]["allowTargets"] == ["127.0.0.2"]
    assert "allows 127.0.0.2" in cluster.loadfleet("agents").stdout
    # The target the list allows runs.
    run = cluster.start_run(plan_for(tmp_path, webs[0].url))
    _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err


STUB_STATUS = "        location = /lf-status { stub_status; }\n"


def accepted_connections(server: NginxServer) -> int:
    with urllib.request.urlopen(f"http://{server.host}:{server.port}/lf-status", timeout=5) as response:
        return int(response.read().decode().splitlines()[2].split()[0])  # "accepts handled requests"


def test_a_target_outside_the_allow_list_sees_zero_connections(cluster, docroot, tmp_path):
    """The controller cannot judge a host name (it resolves none); the agent resolves it,
    finds an address outside its list and refuses the job before any socket opens."""
    port = free_port("127.0.0.1")
    server = NginxServer("127.0.0.1", port, docroot, tmp_path / "nginx", "outside", extra_conf=STUB_STATUS)
    server.start()
    try:
        cluster.add_agent("a1", 1, "--allow-targets", "127.0.0.2")
        cluster.wait_for_agents(1)
        before = accepted_connections(server)
        run = cluster.start_run(plan_for(tmp_path, f"http://localhost:{port}"))
        out, err = run.communicate(timeout=60)
        after = accepted_connections(server)
    finally:
        server.stop()
    assert run.returncode == 1, err
    summary = json.loads(out)
    [failure] = [e["text"] for e in summary["events"] if e["kind"] == "job_failed"]
    assert "outside this agent's allow-list (127.0.0.2)" in failure and "localhost is 127.0.0.1" in failure
    assert after - before == 1, "the target saw a connection besides the status request"
    assert summary["total"]["figures"]["requests"] == 0
