"""HTTP/2 through HAProxy (issue 32): an h2 (TLS, ALPN) and an h2c front over two HTTP/1.1 nginx
backends. What the run counts equals HAProxy's access lines (each says HTTP/2.0, the front's
version) and the sum of the backends' logs. With one engine connection carrying many streams, a
connection-level balancer (`mode tcp`) sends all of them to one backend, while the `mode http` h2
front spreads them over both."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loadfleet.targets.daemon import LabError, Upstream
from loadfleet.targets.haproxy import HaproxyServer
from loadfleet.targets.nginx import NginxServer
from support.cluster import write_plan
from support.procs import free_port, program

pytestmark = pytest.mark.process

HOST = "127.0.0.2"
STREAMS = 8  # one engine connection: clients == max_streams


def run_local(plan: Path, tmp_path: Path) -> dict:
    argv = [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(tmp_path / "runs")]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def backends(docroot, tmp_path, *, http2: bool = False) -> list[NginxServer]:
    return [NginxServer(HOST, free_port(HOST), docroot, tmp_path / "nginx", f"web{i}", http2=http2) for i in (1, 2)]


def balancer(tmp_path, webs, front: str, mode: str = "http") -> HaproxyServer:
    ups = [Upstream(w.name, w.host, w.port) for w in webs]
    return HaproxyServer(HOST, free_port(HOST), tmp_path / "haproxy", f"lb-{front}-{mode}", ups, front=front, mode=mode)


def run_through(lb: HaproxyServer, webs: list[NginxServer], tmp_path, protocol: str) -> dict:
    servers = [*webs, lb]
    try:
        for server in servers:
            server.start()
        scheme = "https" if lb.front == "h2" else "http"
        plan = write_plan(
            tmp_path / f"{lb.name}.yaml",
            duration_s=2,
            targets=[{"url": f"{scheme}://{HOST}:{lb.port}", "protocol": protocol, "max_streams": STREAMS}],
            workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
            load={"model": "closed", "clients": STREAMS},
        )
        summary = run_local(plan, tmp_path)
    finally:
        for server in reversed(servers):
            server.stop()
    assert summary["total"]["errors"] == {}, summary["total"]
    return summary["total"]["figures"]


@pytest.mark.parametrize(("front", "protocol"), [("h2", "h2"), ("h2c", "h2c")])
def test_h2_front_counts_equal_haproxy_and_backend_logs(docroot, tmp_path, front, protocol):
    webs = backends(docroot, tmp_path)
    lb = balancer(tmp_path, webs, front)
    figures = run_through(lb, webs, tmp_path, protocol)
    lines = lb.access_lines()
    assert lines and all(line.startswith("access HTTP/2.0 200 ") for line in lines), lines[:3]
    per_backend = [w.access_log_lines() for w in webs]
    assert figures["requests"] == len(lines) == sum(per_backend)
    assert len(lines) > 50
    # nginx saw HTTP/1.1 from HAProxy: the backends stay HTTP/1.1 behind an h2 front.
    assert all('HTTP/1.1"' in line for w in webs for line in w.access_log.read_text().splitlines())
    assert min(per_backend) > 0, per_backend  # round robin per request


def test_tcp_mode_pins_every_stream_of_a_connection_while_http_mode_spreads_them(docroot, tmp_path):
    tcp_webs = backends(docroot, tmp_path / "tcp", http2=True)
    tcp = balancer(tmp_path, tcp_webs, "h2c", mode="tcp")
    tcp_figures = run_through(tcp, tcp_webs, tmp_path, "h2c")
    sessions = tcp.access_lines()
    # One balancing choice per engine connection (the engine spreads its clients over its
    # threads' connections, fewer than the clients), each carrying thousands of streams.
    assert 0 < len(sessions) < STREAMS, sessions
    assert sum(w.access_log_lines() for w in tcp_webs) == tcp_figures["requests"] > 50 * len(sessions)

    http_webs = backends(docroot, tmp_path / "http")
    http = balancer(tmp_path, http_webs, "h2c")
    http_figures = run_through(http, http_webs, tmp_path, "h2c")
    spread = [w.access_log_lines() for w in http_webs]
    # One choice per stream: round robin alternates the backends within each connection.
    assert len(http.access_lines()) == sum(spread) == http_figures["requests"], spread
    assert min(spread) > 0.4 * sum(spread), spread


def test_bad_front_and_mode_are_refused_by_name(tmp_path):
    ups = [Upstream("web", HOST, 1)]
    with pytest.raises(LabError, match="front must be one of http1, h2, h2c, not 'h3'"):
        HaproxyServer(HOST, 1, tmp_path, "lb", ups, front="h3")
    with pytest.raises(LabError, match="mode must be one of http, tcp"):
        HaproxyServer(HOST, 1, tmp_path, "lb", ups, mode="udp")
