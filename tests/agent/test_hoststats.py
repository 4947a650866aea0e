"""The monitor-only agent's host sampling, on this real host: a busy process, loopback
traffic and the command line that asks for them."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from loadfleet.agent import cli
from loadfleet.agent.hoststats import HostSampler, ProcessGroup, process_groups, tcp_established

SPIN = "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end: pass\n"


@pytest.fixture
def spinner(tmp_path):
    """A child process that keeps one core busy for at most 3 s, with its PID in a file."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN])
    pid_file = tmp_path / "spin.pid"
    pid_file.write_text(f"{proc.pid}\n")
    yield pid_file
    proc.kill()
    proc.wait()


@pytest.mark.process
def test_a_busy_process_in_a_pid_file_shows_its_cpu(spinner):
    sampler = HostSampler((ProcessGroup("spin", spinner),))
    time.sleep(1.0)
    figures = sampler.sample()
    [spin] = figures.processes
    assert spin.name == "spin" and spin.count == 1
    assert spin.cpu_pct > 50  # one core, busy (a shared machine may take some of it)
    assert spin.rss_mb > 1
    assert figures.cpu_pct > 0 and figures.cores >= 1 and 0 < figures.mem_used_pct < 100


@pytest.mark.process
def test_a_process_name_matches_every_process_of_that_name():
    sleepers = [subprocess.Popen(["sleep", "5"]) for _ in range(2)]
    try:
        [group] = HostSampler((ProcessGroup("sleep"),)).sample().processes
        assert group.count >= 2
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait()


def test_a_pid_file_without_a_process_gives_an_empty_group(tmp_path):
    (tmp_path / "gone.pid").write_text("999999999\n")
    [group] = HostSampler((ProcessGroup("gone", tmp_path / "gone.pid"),)).sample().processes
    assert (group.count, group.cpu_pct, group.rss_mb) == (0, 0.0, 0.0)


def test_loopback_traffic_counts_when_asked_for_and_connections_are_counted():
    sampler = HostSampler(interfaces=("lo",))
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        with client, peer:
            established = tcp_established()
            payload = b"x" * 2**20
            client.sendall(payload)
            received = 0
            while received < len(payload):
                received += len(peer.recv(2**16))
            figures = sampler.sample()
    assert established >= 2  # both ends of the connection above
    assert figures.net_rx_bytes_per_s > 0 and figures.net_tx_bytes_per_s > 0


def test_pid_files_are_named_by_their_stem_unless_named():
    groups = process_groups(["nginx"], ["/run/web1.pid", "php=/run/fpm.pid"])
    assert [(g.name, str(g.pid_file) if g.pid_file else None) for g in groups] == [
        ("nginx", None),
        ("web1", "/run/web1.pid"),
        ("php", "/run/fpm.pid"),
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--monitor"], "--monitor needs --target URL"),
        (["--process", "nginx"], "need --monitor"),
    ],
)
def test_monitor_options_are_checked(argv, message, capsys):
    assert cli.main(["--controller", "127.0.0.1:1", *argv]) == 2
    assert message in capsys.readouterr().err
