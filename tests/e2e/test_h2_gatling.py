"""The Gatling driver on HTTP/2 (issue 32): an `h2` https target is loaded with Gatling's
`enableHttp2()` (ALPN), and nginx's access log shows HTTP/2.0 for every request it counted."""

from __future__ import annotations

import json
import subprocess

import pytest

from loadfleet.targets.nginx import NginxServer
from support.cluster import write_plan
from support.procs import free_port, program

pytestmark = pytest.mark.process

HOST = "127.0.0.2"
DURATION_S = 8  # the JVM's start takes seconds of a local run's first ones on a busy host


def test_gatling_loads_an_h2_target_over_http2_and_counts_what_nginx_logged(docroot, tmp_path):
    server = NginxServer(HOST, free_port(HOST), docroot, tmp_path / "nginx", "h2", tls=True, http2=True)
    server.start()
    try:
        plan = write_plan(
            tmp_path / "plan.yaml",
            duration_s=DURATION_S,
            driver="gatling",
            targets=[{"url": f"https://{HOST}:{server.port}", "protocol": "h2"}],
            workload={"keep_alive": True, "requests": [{"name": "page", "path": "/manifest.json"}]},
            load={"model": "closed", "clients": 4},
        )
        argv = [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(tmp_path / "runs")]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    total = json.loads(result.stdout)["total"]
    lines = server.access_log.read_text().splitlines()
    assert all('HTTP/2.0"' in line for line in lines), lines[:2]
    assert total["figures"]["requests"] == len(lines) > 20
