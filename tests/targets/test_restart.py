"""`loadfleet-lab restart`: the order servers restart in, and a real lab's servers restarted on
the same ports with new PIDs, the balancer still forwarding to its restarted backends."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlsplit

import pytest

from loadfleet.targets import daemon
from loadfleet.targets.daemon import stop_pid
from loadfleet.targets.restart import UnknownServers, restart_order
from support.procs import pid_alive, program

# The lab's start order as a spec with a database, PHP on it, two web servers and a balancer.
START_ORDER = ["db", "shop", "web1", "web2", "lb"]


def test_stop_pid_returns_only_once_a_process_that_ignores_sigterm_is_gone(monkeypatch):
    """SIGKILL is not instant for a process with thousands of sockets to close: stop_pid waits,
    so that a server started in its place does not find it still there."""
    monkeypatch.setattr(daemon, "STOP_TIMEOUT_S", 0.3)
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"],
        start_new_session=True,
    )
    try:
        time.sleep(0.5)  # its SIGTERM handler is set
        started = time.monotonic()
        stop_pid(stubborn.pid)
        assert time.monotonic() - started >= 0.3  # SIGTERM was ignored for the whole timeout
        assert not pid_alive(stubborn.pid)  # and SIGKILL's end was waited for (stop_pid reaps its child)
    finally:
        stubborn.kill()
        stubborn.wait()


def test_restart_all_stops_dependents_first_and_starts_dependencies_first():
    stop, start = restart_order(START_ORDER, [])
    assert start == START_ORDER
    assert stop == list(reversed(START_ORDER))
    assert stop.index("lb") < stop.index("web1") and start.index("db") < start.index("shop")


def test_restart_of_named_servers_keeps_the_lab_order_not_the_order_named():
    stop, start = restart_order(START_ORDER, ["lb", "db"])
    assert start == ["db", "lb"] and stop == ["lb", "db"]


def test_unknown_server_names_are_named():
    with pytest.raises(UnknownServers) as caught:
        restart_order(START_ORDER, ["web1", "nope", "web9"])
    assert caught.value.names == ["nope", "web9"]
    assert "nope, web9" in str(caught.value)


def _get(url: str) -> int:
    with urllib.request.urlopen(url + "/manifest.json", timeout=5) as response:
        response.read()
        return int(response.status)


def _servers(state_dir) -> dict[str, dict]:
    return {e["name"]: e for e in json.loads((state_dir / "lab.json").read_text())["servers"]}


def test_cli_restart_gives_new_pids_on_the_same_ports_and_the_balancer_forwards(open_dir):
    spec, state = open_dir / "lab.yaml", open_dir / "s"
    spec.write_text(
        json.dumps(
            {
                "workload": {"scale": 0.1, "seed": 2},
                "servers": [
                    {"name": "web1", "listen": "127.0.0.2:0"},
                    {"name": "web2", "listen": "127.0.0.3:0"},
                    {"name": "lb", "kind": "haproxy", "backends": ["web1", "web2"], "listen": "127.0.0.4:0"},
                ],
            }
        )
    )
    lab = [program("loadfleet-lab")]
    up = subprocess.run([*lab, "up", str(spec), "--state-dir", str(state)], capture_output=True, text=True)
    pids: list[int] = []
    try:
        assert up.returncode == 0, up.stderr
        before = _servers(state)
        pids += [p for e in before.values() for p in e["pids"]]
        assert _get(before["lb"]["url"]) == 200
        unknown = subprocess.run([*lab, "restart", "--state-dir", str(state), "web7"], capture_output=True, text=True)
        assert unknown.returncode == 2 and "web7" in unknown.stderr
        done = subprocess.run([*lab, "restart", "--state-dir", str(state)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        after = _servers(state)
        pids += [p for e in after.values() for p in e["pids"]]
        for name in ("web1", "web2", "lb"):
            assert f"restarted {name}: {before[name]['url']}" in done.stdout
            assert after[name]["url"] == before[name]["url"]  # same address and port
            assert not set(after[name]["pids"]) & set(before[name]["pids"])
            assert all(pid_alive(p) for p in after[name]["pids"])
            assert not any(pid_alive(p) for p in before[name]["pids"])
        assert [_get(after["lb"]["url"]) for _ in range(4)] == [200] * 4  # both backends, round robin

        only_lb = subprocess.run([*lab, "restart", "--state-dir", str(state), "lb"], capture_output=True, text=True)
        assert only_lb.returncode == 0, only_lb.stderr
        last = _servers(state)
        pids += last["lb"]["pids"]
        assert "restarted lb:" in only_lb.stdout and "web1" not in only_lb.stdout
        assert last["web1"]["pids"] == after["web1"]["pids"] and last["lb"]["pids"] != after["lb"]["pids"]
        assert _get(last["lb"]["url"]) == 200

        # Another process takes web2's port while it restarts: exit 1, naming the server.
        stop_pid(last["web2"]["pid"])
        address = urlsplit(last["web2"]["url"])
        with socket.create_server((address.hostname, address.port)):
            failed = subprocess.run(
                [*lab, "restart", "--state-dir", str(state), "web2"], capture_output=True, text=True
            )
        assert failed.returncode == 1 and "web2" in failed.stderr, failed.stderr
    finally:
        down = subprocess.run([*lab, "down", "--state-dir", str(state)], capture_output=True, text=True)
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(p) for p in pids)
