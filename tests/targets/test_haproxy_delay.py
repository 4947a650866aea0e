"""HAProxy's injected delay (haproxy.py `delay_ms`): every request is held at least that long, and
a proxy without it adds none — the known slowdown of the regression gate's experiment (bench/gate)."""

from __future__ import annotations

import http.client
import statistics
import time

import pytest

from loadfleet.targets.daemon import LabError, Upstream
from loadfleet.targets.haproxy import MAX_DELAY_MS, HaproxyServer
from loadfleet.targets.nginx import NginxServer
from support.procs import free_port

pytestmark = pytest.mark.process  # starts real servers (tests/conftest.py)

HOST = "127.0.0.61"
DELAY_MS = 20


def latencies_ms(host: str, port: int, n: int = 20) -> list[float]:
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            conn.request("GET", "/index.html")
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b"hello\n"
            out.append((time.perf_counter() - start) * 1000)
        return out
    finally:
        conn.close()


def test_a_delayed_haproxy_holds_every_request_and_an_undelayed_one_does_not(tmp_path):
    docroot = tmp_path / "docroot"
    docroot.mkdir()
    (docroot / "index.html").write_text("hello\n")
    web = NginxServer(HOST, free_port(HOST), docroot, tmp_path, "web")
    backend = [Upstream("web", web.host, web.port)]
    plain = HaproxyServer(HOST, free_port(HOST), tmp_path, "plain", backend)
    slow = HaproxyServer(HOST, free_port(HOST), tmp_path, "slow", backend, delay_ms=DELAY_MS)
    servers = [web, plain, slow]
    try:
        for server in servers:
            server.start()
        held = latencies_ms(slow.host, slow.port)
        direct = latencies_ms(plain.host, plain.port)
    finally:
        for server in reversed(servers):
            server.stop()
    assert min(held) >= DELAY_MS, held
    assert statistics.median(direct) < DELAY_MS / 2, direct
    assert "lua.delay" in slow.config() and "lua" not in plain.config()


@pytest.mark.parametrize("delay_ms", [-1, MAX_DELAY_MS + 1])
def test_a_delay_out_of_range_is_refused_with_its_bounds(tmp_path, delay_ms):
    with pytest.raises(LabError, match=f"delay_ms must be 0 to {MAX_DELAY_MS}"):
        HaproxyServer(HOST, 18000, tmp_path, "lb", [Upstream("web", HOST, 18001)], delay_ms=delay_ms)
