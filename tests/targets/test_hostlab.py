"""Labs on hosts of their own from the CLI (loadfleet.targets.hostlab, `loadfleet-lab` with a spec's
`hosts:` sections): `up` builds the lab network, its servers, controller and agent; `status` shows
it; a request from an agent's namespace reaches the servers; a plan runs through `exec`; `down`
removes namespaces, guard route and cgroups.

Safety: the lab network is a free 10.231.X.0/24 behind its guard route (netns.py); load goes only
to the namespaces the lab made, for 2 s. The fixture removes whatever `up` left, even when a test
fails, and then checks that nothing stayed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import subprocess
from pathlib import Path

import pytest

from loadfleet.targets.caps import CpuGroup, machine_cpus
from loadfleet.targets.daemon import LocalLauncher, Upstream, check_upstreams, pid_alive
from loadfleet.targets.haproxy import HaproxyServer
from loadfleet.targets.hostlab import monitor_options, teardown
from loadfleet.targets.netns import Host, guard_present, list_namespaces
from loadfleet.targets.varnish import VarnishServer
from support.procs import program

SPEC = """
workload: {kind: tree, scale: 0.1, seed: 3}
hosts:
  web1: {servers: [nginx], cpus: [{cpu}], cpu_pct: 50}
  lb:   {servers: [{name: lb, kind: haproxy, backends: [web1]}]}
  ctrl: {controller: true}
agents: {count: 1}
"""
PLAN = """
name: hosts-smoke
duration_s: 2
targets: [{url: "http://{lb}:80"}]
workload: {requests: [{name: manifest, path: /manifest.json}]}
load: {model: closed, clients: 1}
agents: {count: 1, wait_s: 20}
"""
LAB_TIMEOUT_S = 180
CURL = ["curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}"]


def lab(*args: str, timeout_s: float = LAB_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([program("loadfleet-lab"), *args], capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture
def hosted(open_dir):
    """The state directory of a lab with hosts; afterwards `down` (and, should it fail, a teardown
    from the recorded state), then a check that no namespace, guard route or process stayed."""
    state_dir = open_dir / "state"
    seen: dict = {}
    try:
        yield state_dir, seen
    finally:
        state_file = state_dir / "lab.json"
        state = json.loads(state_file.read_text()) if state_file.exists() else {}
        seen.update(state)
        with contextlib.suppress(subprocess.TimeoutExpired):
            lab("down", "--state-dir", str(state_dir))
        if state_file.exists():  # down failed: remove what it recorded all the same
            teardown(state)
    network = seen.get("network")
    if network:
        assert not any(n in list_namespaces(network["prefix"]) for n in network["namespaces"]), "a namespace stayed"
        assert not guard_present(ipaddress.IPv4Network(network["subnet"])), "the guard route stayed"
    alive = [p for e in seen.get("servers", []) for p in e.get("pids") or [e["pid"]] if pid_alive(p)]
    assert not alive, f"processes stayed: {alive}"


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_cli_up_status_exec_down_of_a_lab_on_hosts(hosted, tmp_path):
    state_dir, seen = hosted
    spec = tmp_path / "hosts.yaml"
    cpu = max(machine_cpus())
    spec.write_text(SPEC.replace("{cpu}", str(cpu)))
    up = lab("up", str(spec), "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    state = json.loads((state_dir / "lab.json").read_text())
    seen.update(state)
    hosts = {h["name"]: h["address"] for h in state["network"]["hosts"]}
    assert set(hosts) == {"web1", "lb", "ctrl", "agent1"}
    assert f"web1: http://{hosts['web1']}:80 (nginx on web1" in up.stdout
    assert f"controller: {hosts['ctrl']}:7700 on ctrl" in up.stdout
    # web1's caps hold for its nginx, all its processes: pinned, and in the host's quota group.
    (nginx,) = [e for e in state["servers"] if e["name"] == "web1"]
    (group,) = [Path(g) for g in state["cgroups"] if g.endswith("-web1")]
    assert os.sched_getaffinity(nginx["pid"]) == {cpu}
    assert nginx["pid"] in {int(p) for p in (group / "cgroup.procs").read_text().split()}
    assert CpuGroup(group, 50).quota_us() == 50_000

    status = lab("status", "--state-dir", str(state_dir))
    assert status.returncode == 0
    # web1, lb, the controller, agent1, and the monitors the lab started on web1 and lb.
    assert status.stdout.count(" up") == 6 and "DOWN" not in status.stdout
    assert "5 of 5 namespaces, guard route present" in status.stdout  # four hosts and the bridge
    assert f"host agent1   {hosts['agent1']}" in status.stdout

    # From the agent's namespace: nginx on web1 directly, and through HAProxy on lb.
    for url in (f"http://{hosts['web1']}/manifest.json", f"http://{hosts['lb']}/manifest.json"):
        fetched = lab("exec", "--state-dir", str(state_dir), "agent1", "--", *CURL, url, timeout_s=30)
        assert fetched.returncode == 0 and fetched.stdout == "200", (url, fetched.stdout, fetched.stderr)
    # Not from the root namespace: the guard route makes the lab subnet unreachable here.
    outside = subprocess.run([*CURL, f"http://{hosts['web1']}/"], capture_output=True, text=True, timeout=30)
    assert outside.returncode != 0

    # A plan run by the lab's controller on the lab's agent, as docs/lab.md shows.
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("{lb}", hosts["lb"]))
    run = lab(
        "exec", "--state-dir", str(state_dir), "ctrl", "--", "loadfleet", "run", "--json", str(plan), timeout_s=120
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    figures, status = summary["total"]["figures"], summary["total"]["status"]
    assert figures["requests"] > 0 and figures["failed"] == 0 and status["2xx"] == figures["requests"], figures
    # The monitors the lab started by itself: each server host, its server's processes (by PID
    # file), and HAProxy's counters: every request the run sent went through it.
    monitored = {h["host"]: h for h in summary["hosts"]}
    assert set(monitored) == {"web1", "lb"}, monitored
    assert [p["name"] for p in monitored["web1"]["processes"]] == ["nginx"]
    assert [p["name"] for p in monitored["lb"]["processes"]] == ["haproxy"]
    assert monitored["lb"]["processes"][0]["cpu_pct"] > 0
    assert monitored["lb"]["counter_rates"]["haproxy.group.web1.req_tot"] > 0

    down = lab("down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert "web1" in down.stdout and "agent1" in down.stdout
    assert not (state_dir / "lab.json").exists() and not group.exists()
    after = lab("status", "--state-dir", str(state_dir))
    assert "no lab in this state directory" in after.stdout


NFS_SPEC = """
workload: {kind: tree, scale: 0.1, seed: 4}
hosts:
  nfs:  {nfs: true}
  web1: {servers: [nginx], link_mbit: 100}
  web2: {servers: [{kind: apache, mpm: prefork, profile: stock}]}
  lb:   {servers: [{name: lb, kind: varnish, backends: [web1, web2], cache: false}]}
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_cli_up_of_a_lab_with_an_nfs_host_serves_its_export_through_a_balancer(hosted, tmp_path):
    """ganesha on its own host; each web host mounts the export over its link; Varnish on a
    fourth host passes to both. Requests from the NFS host (any lab host will do) read files
    that crossed the lab network twice."""
    state_dir, seen = hosted
    spec = tmp_path / "nfs.yaml"
    spec.write_text(NFS_SPEC)
    up = lab("up", str(spec), "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    state = json.loads((state_dir / "lab.json").read_text())
    seen.update(state)
    placed = {e["name"]: e.get("host") for e in state["servers"]}
    assert placed == {
        "nfs-server": "nfs",
        "nfs-mount-web1": "web1",
        "nfs-mount-web2": "web2",
        "web1": "web1",
        "web2": "web2",
        "lb": "lb",
    }
    hosts = {h["name"]: h["address"] for h in state["network"]["hosts"]}
    files = json.loads((state_dir / "export" / "manifest.json").read_text())["files"][:4]
    for entry in files:  # round robin: two to each web server
        fetched = lab(
            "exec",
            "--state-dir",
            str(state_dir),
            "nfs",
            "--",
            "curl",
            "-sS",
            "-m",
            "10",
            f"http://{hosts['lb']}{entry['path']}",
            timeout_s=30,
        )
        assert fetched.returncode == 0
        assert fetched.stdout.encode() == (state_dir / "export" / entry["path"].lstrip("/")).read_bytes()
    status = lab("status", "--state-dir", str(state_dir))
    assert (
        f"nfs client ::ffff:{hosts['web1']}" in status.stdout and f"nfs client ::ffff:{hosts['web2']}" in status.stdout
    )
    down = lab("down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    mounts = Path("/proc/mounts").read_text()
    assert not any(e.get("mountpoint", "\0") in mounts for e in state["servers"]), "a FUSE mount stayed"


@pytest.mark.parametrize(
    "launcher_kind, backend, error",
    [
        ("loopback", "10.231.9.10", "not a loopback address"),
        ("loopback", "192.0.2.1", "not a loopback address"),
        ("host", "192.0.2.1", "not on the lab network"),
        ("host", "not-an-address", "not an IP address"),
    ],
)
def test_balancers_refuse_backends_beyond_their_network(tmp_path, launcher_kind, backend, error):
    """A balancer on loopback forwards to loopback only; one on a lab host to its lab network
    (or its own loopback) only. Checked before anything starts."""
    launcher = LocalLauncher() if launcher_kind == "loopback" else Host("web9", "10.231.9.10", "none", 0)
    backends = [Upstream("b", backend, 80)]
    for kind in (HaproxyServer, VarnishServer):
        with pytest.raises(ValueError, match=error):
            if launcher_kind == "loopback":
                kind("127.0.0.2", 8080, tmp_path, "lb", backends, launcher=launcher)
            else:  # the host's own address check needs its namespace: only the backends here
                check_upstreams(launcher, backends, what=kind.kind)


def test_a_lab_host_balancer_may_forward_to_its_own_loopback():
    Host("web9", "10.231.9.10", "none", 0).check_peer("127.0.0.1")


def test_teardown_of_an_empty_state_does_nothing():
    assert teardown({}) == []


def test_exec_names_the_hosts_when_one_is_unknown(tmp_path):
    (tmp_path / "lab.json").write_text(json.dumps({"servers": [], "network": {"hosts": [{"name": "web1"}]}}))
    result = lab("exec", "--state-dir", str(tmp_path), "nope", "--", "true", timeout_s=30)
    assert result.returncode == 1 and "no lab host 'nope'" in result.stderr and "web1" in result.stderr


def test_a_lab_hosts_monitor_watches_its_servers_by_pid_file_and_reads_haproxys_socket(tmp_path):
    """What the monitor of a lab host is told, read back by the agent's own parser: the host's
    servers as targets, their processes by PID file (children included), HAProxy's counters."""
    import socket

    from loadfleet.agent.cli import monitor
    from loadfleet.agent.cli.parser import build_parser

    lb = HaproxyServer("127.0.0.2", 8080, tmp_path, "lb", [Upstream("web1", "127.0.0.3", 80)], launcher=LocalLauncher())
    lb.pid = os.getpid()
    lb.dir.mkdir()
    with socket.socket(socket.AF_UNIX) as stats:
        stats.bind(str(lb.stats_socket))
        options = monitor_options("lb", [lb], tmp_path / "pids")
        config = monitor.monitor_config(build_parser().parse_args(["--controller", "10.0.0.1:7700", *options]))
    assert config.targets == ("http://127.0.0.2:8080",) and config.role == "lb"
    [group] = config.groups
    assert group.name == "haproxy" and group.pids() >= {os.getpid()}
    [source] = config.servers
    assert source.stats_socket == lb.stats_socket

    # Two servers on a host: each group by its server's name, one a PID.
    web = Upstream("web1", "127.0.0.3", 80)
    other = HaproxyServer("127.0.0.3", 8081, tmp_path, "lb2", [web], launcher=LocalLauncher())
    other.pid = 4242
    options = monitor_options("lb", [lb, other], tmp_path / "pids")
    assert [o for o in options if o.startswith("--pid-file")] == [
        f"--pid-file=lb={tmp_path / 'pids' / 'lb.pid'}",
        f"--pid-file=lb2={tmp_path / 'pids' / 'lb2.pid'}",
    ]
    assert (tmp_path / "pids" / "lb2.pid").read_text() == "4242\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_cli_restart_of_a_lab_on_hosts_keeps_addresses_and_the_balancer_forwards(hosted, tmp_path):
    state_dir, seen = hosted
    spec = tmp_path / "hosts.yaml"
    spec.write_text(
        "workload: {kind: tree, scale: 0.1, seed: 3}\n"
        "hosts:\n  web1: {servers: [nginx]}\n  lb: {servers: [{name: lb, kind: haproxy, backends: [web1]}]}\n"
    )
    up = lab("up", str(spec), "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    before = {e["name"]: e for e in json.loads((state_dir / "lab.json").read_text())["servers"]}
    seen.update(json.loads((state_dir / "lab.json").read_text()))
    done = lab("restart", "--state-dir", str(state_dir))
    assert done.returncode == 0, done.stderr
    state = json.loads((state_dir / "lab.json").read_text())
    seen["servers"] = [*before.values(), *state["servers"]]  # the fixture checks none of them stays
    after = {e["name"]: e for e in state["servers"]}
    for name in ("web1", "lb"):
        assert after[name]["url"] == before[name]["url"] and after[name]["host"] == before[name]["host"]
        assert not set(after[name]["pids"]) & set(before[name]["pids"]), f"{name} was not restarted"
    netns = {h["name"]: h["netns"] for h in state["network"]["hosts"]}["web1"]
    curl = ["nsenter", f"--net=/var/run/netns/{netns}", "--", *CURL, after["lb"]["url"] + "/manifest.json"]
    assert subprocess.run(curl, capture_output=True, text=True, timeout=10).stdout == "200"
