"""The agent's health figures that say whether its engines ran out of something: CPU wait
from schedstat, ports from sockstat and the TCP tables, descriptors against their limit."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from loadfleet.agent.health import HealthMonitor, port_range, schedstat_wait_ns, sockstat_tcp


def test_schedstat_wait_sums_the_threads_and_says_when_it_cannot(tmp_path):
    for tid, fields in (("11", "500 7000 3"), ("12", "100 3000 1")):
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(fields + "\n")
    assert schedstat_wait_ns(tmp_path) == 10_000
    (tmp_path / "13").mkdir()  # a thread gone between listing and reading
    assert schedstat_wait_ns(tmp_path) == 10_000
    assert schedstat_wait_ns(tmp_path / "missing") is None


def test_port_range_and_sockstat(tmp_path):
    (tmp_path / "range").write_text("32768\t60999\n")
    assert port_range(tmp_path / "range") == 28232
    assert port_range(tmp_path / "nothing") == 0
    (tmp_path / "sockstat").write_text(
        "sockets: used 200\nTCP: inuse 40 orphan 0 tw 900 alloc 45 mem 3\nUDP: inuse 2\n"
    )
    assert sockstat_tcp(tmp_path / "sockstat") == 940


def test_the_port_figure_is_the_hosts_socket_count_without_walking_the_socket_table(tmp_path):
    """/proc/net/tcp lists every TCP socket of the host: one read froze a generator holding 8,000
    connections on loopback. The figure is sockstat's count, whatever the table says."""
    proc = tmp_path / "proc"
    (proc / "sys/net/ipv4").mkdir(parents=True)
    (proc / "net").mkdir()
    (proc / "sys/net/ipv4/ip_local_port_range").write_text("60000\t60099\n")
    (proc / "net/sockstat").write_text("TCP: inuse 70 orphan 0 tw 5 alloc 70 mem 1\n")
    rows = "".join(f"   {i}: 0100007F:{0x8000 + i:04X} 0200007F:0050 01\n" for i in range(3))
    (proc / "net/tcp").write_text("  sl  local_address rem_address   st\n" + rows)  # a walk would say 3
    sample = HealthMonitor(proc=proc).sample([], 0.0)
    assert (sample.local_ports_used, sample.local_port_range) == (75, 100)


@pytest.mark.process
def test_a_process_that_waits_for_the_cpu_and_holds_descriptors_shows_both():
    cpu = max(os.sched_getaffinity(0))
    limit = 200
    script = (
        "import resource, socket, time\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))\n"
        "held = [socket.socket() for _ in range(150)]\n"
        "while True:\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.002: pass\n"
        "    time.sleep(0.001)\n"
    )
    engine = subprocess.Popen([sys.executable, "-c", script])
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for p in (engine, *burners):
            os.sched_setaffinity(p.pid, {cpu})
        monitor = HealthMonitor()
        monitor.sample([engine.pid], 0.0)
        time.sleep(1.0)
        h = monitor.sample([engine.pid], 0.0)
    finally:
        for p in (engine, *burners):
            p.kill()
            p.wait()
    assert h.busiest_engine_wait_pct is not None and h.busiest_engine_wait_pct > 10  # wanted ~67 %, shared 3 ways
    assert h.busiest_engine_cpu_pct > 5
    assert h.engine_fd_limit == limit and h.engine_fds >= 150
    assert h.local_port_range > 0


def test_no_engines_no_engine_figures():
    h = HealthMonitor().sample([], 0.0)
    assert (h.busiest_engine_cpu_pct, h.busiest_engine_wait_pct, h.engine_fds, h.engine_fd_limit) == (0, None, 0, 0)
