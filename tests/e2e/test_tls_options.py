"""TLS options per target (issue 32 item 4) against a real nginx that asks for a client
certificate of the lab's own CA (targets/pki.py, NginxServer(mtls=True)). nginx's tls.log says,
per request, the protocol, whether the session was resumed, the SNI it got and how the client
certificate verified: each option is judged by what the server saw, and the run's count by
the server's lines."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loadfleet.targets.nginx import NginxServer
from loadfleet.targets.pki import SERVER_NAME, lab_pki
from support.cluster import write_plan
from support.procs import free_port, program

pytestmark = pytest.mark.process

HOST = "127.0.0.2"


@pytest.fixture
def mtls(docroot, tmp_path):
    server = NginxServer(HOST, free_port(HOST), docroot, tmp_path / "nginx", "mtls", mtls=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def run(server: NginxServer, tmp_path: Path, tls: dict, *, keep_alive: bool = True) -> dict:
    plan = write_plan(
        tmp_path / "plan.yaml",
        duration_s=1,
        targets=[{"url": f"https://{HOST}:{server.port}", "tls": tls}],
        workload={"requests": [{"name": "manifest", "path": "/manifest.json"}], "keep_alive": keep_alive},
        load={"model": "closed", "clients": 2},
    )
    argv = [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(tmp_path / "runs")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    assert done.returncode in (0, 1, 4), done.stderr  # a run whose every request failed exits non-zero
    return json.loads(done.stdout)["total"]


def seen(server: NginxServer) -> list[list[str]]:
    """tls.log's lines as fields: protocol, resumed, SNI, client verification, status."""
    return [line.split() for line in server.tls_log.read_text().splitlines()]


def client(server: NginxServer) -> dict:
    return {"client_cert": str(server.dir / "client.pem"), "client_key": str(server.dir / "client-key.pem")}


def test_a_client_certificate_of_the_ca_is_accepted_and_every_request_counted(mtls, tmp_path):
    total = run(mtls, tmp_path, {**client(mtls), "ca": str(mtls.dir / "ca.pem"), "sni": SERVER_NAME})
    lines = seen(mtls)
    assert total["errors"] == {}, total
    assert total["figures"]["requests"] == len(lines) > 20
    assert all(fields[3] == "SUCCESS" and fields[4] == "200" for fields in lines), lines[:3]
    assert {fields[2] for fields in lines} == {SERVER_NAME}  # the SNI the plan gave, verified against


def test_without_a_client_certificate_the_servers_400s_are_counted(mtls, tmp_path):
    total = run(mtls, tmp_path, {"version": "1.3"})
    lines = seen(mtls)
    assert lines and all(fields[3] == "NONE" and fields[4] == "400" for fields in lines), lines[:3]
    assert total["figures"]["requests"] == len(lines)
    assert sum(total["errors"].values()) == len(lines), total["errors"]


def test_a_server_the_ca_did_not_sign_fails_the_handshake(mtls, tmp_path):
    other = lab_pki(tmp_path / "other-ca", HOST)
    total = run(mtls, tmp_path, {**client(mtls), "ca": str(other.ca)})
    assert seen(mtls) == []  # no request reached nginx
    assert total["figures"]["requests"] > 0
    assert set(total["errors"]) == {"tls"}, total["errors"]


def test_a_pinned_version_is_the_one_negotiated(mtls, tmp_path):
    run(mtls, tmp_path, {**client(mtls), "version": "1.2"})
    assert {fields[0] for fields in seen(mtls)} == {"TLSv1.2"}


@pytest.mark.parametrize(("resumption", "resumed"), [(False, {"."}), (True, {".", "r"})])
def test_resumption_off_makes_a_full_handshake_every_connection(mtls, tmp_path, resumption, resumed):
    run(mtls, tmp_path, {**client(mtls), "resumption": resumption}, keep_alive=False)
    lines = seen(mtls)
    assert len(lines) > 20
    assert {fields[1] for fields in lines} == resumed, lines[:5]
