"""Several hosts as network namespaces on one bridge (loadfleet.targets.netns), and the real
system across them: a controller, two agents and two nginx servers, each on its own host.

Safety: every subnet is a free 10.231.X.0/24 (LabNetwork picks it), guarded by `ip route add
unreachable` before the first packet; load goes only to namespaces these tests created. Each
fixture checks that teardown left no namespace, no veth, no guard route and no process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadfleet.targets.daemon import LabError, pid_alive
from loadfleet.targets.fusemount import FuseMount, is_mounted
from loadfleet.targets.netns import STATE_DIR, LabNetwork, check_subnet, cleanup_stale, guard_present, list_namespaces
from loadfleet.targets.netns_nginx import NamespaceNginx
from loadfleet.targets.nfs import GaneshaServer
from loadfleet.targets.workload import generate_tree
from support.fleetlab import CONTROLLER_PORT, WEB_PORT, FleetLab, Leftovers, finish
from support.procs import program

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


@pytest.fixture
def leftovers():
    return Leftovers()


def connect(src, address: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether a TCP connection from host `src` to ADDRESS:PORT succeeds."""
    code = f"import socket; socket.create_connection(('{address}', {port}), timeout={timeout_s}).close()"
    return src.run([sys.executable, "-c", code], timeout=10).returncode == 0


def test_hosts_reach_each_other_but_not_from_the_root_namespace(leftovers, tmp_path):
    docroot = tmp_path / "docroot"
    docroot.mkdir()
    (docroot / "index.html").write_text("hello\n")
    with LabNetwork() as net:
        assert guard_present(net.subnet)
        a, b = net.add_host("a"), net.add_host("b")
        assert a.address != b.address and {a.address, b.address} <= set(map(str, net.subnet.hosts()))
        web = NamespaceNginx(b, WEB_PORT, docroot, tmp_path / "state", "web")
        web.start()
        leftovers.pids.append(web.pid)
        assert connect(a, b.address, WEB_PORT)
        # The guard: from the root namespace the lab subnet is unreachable, not routed out.
        with socket.socket() as s, pytest.raises(OSError) as refused:
            s.settimeout(2)
            s.connect((b.address, WEB_PORT))
        assert refused.value.errno in (113, 101), refused.value  # EHOSTUNREACH, ENETUNREACH

        net.cut(b)
        assert not connect(a, b.address, WEB_PORT)
        net.restore(b)
        assert connect(a, b.address, WEB_PORT, timeout_s=3)
        assert web.access_log_lines() == 0  # connections only, no request
    leftovers.check(net)


def test_teardown_after_an_exception_stops_processes_not_stopped_by_the_caller(leftovers):
    with pytest.raises(RuntimeError, match="test failure"), LabNetwork() as net:
        host = net.add_host("h1")
        proc = host.spawn(["sleep", "300"])
        leftovers.pids.append(proc.pid)
        assert Path(f"/proc/{proc.pid}/ns/net").resolve() != Path("/proc/self/ns/net").resolve()
        raise RuntimeError("test failure")
    leftovers.check(net)


def test_a_subnet_in_use_is_refused(leftovers):
    with LabNetwork() as net:
        assert net.subnet.subnet_of(check_subnet("10.231.0.0/16")) and net.subnet.prefixlen == 24
        for subnet in (net.subnet, next(net.subnet.subnets(new_prefix=25))):
            with pytest.raises(LabError, match="lab guard route"), LabNetwork(str(subnet)):
                pass
    leftovers.check(net)


def machine_subnet() -> str | None:
    """A private subnet the root namespace routes (its own LAN), if any."""
    routes = json.loads(subprocess.run(["ip", "-j", "-4", "route"], capture_output=True, text=True).stdout)
    for route in routes:
        dst = route.get("dst", "default")
        # A guard route (type unreachable) is a lab's, maybe a crashed one's, not the machine's LAN.
        if dst != "default" and "/" in dst and route.get("type", "unicast") == "unicast":
            try:
                return str(check_subnet(dst))
            except ValueError:
                continue
    return None


@pytest.mark.parametrize(
    "subnet, error",
    [
        ("8.8.8.0/24", "not a private subnet"),
        ("127.0.0.0/24", "not a private subnet"),
        ("10.0.0.0/8", "must be a /16 to /29"),
        ("10.231.1.300/24", "not an IPv4 subnet"),
    ],
)
def test_bad_subnets_are_refused(subnet, error):
    with pytest.raises(ValueError, match=error):
        LabNetwork(subnet)


def test_a_subnet_of_the_machine_is_refused():
    subnet = machine_subnet()
    if subnet is None:
        pytest.skip("the machine routes no private subnet")
    with pytest.raises(LabError, match="overlaps"), LabNetwork(subnet):
        pass
    assert not guard_present(check_subnet(subnet))


def live_lab_subnets() -> set[str]:
    records = [json.loads(p.read_text()) for p in STATE_DIR.glob("*.json")]
    return {r["subnet"] for r in records if pid_alive(r["pid"])}


CRASH_PREFIX = f"x{os.getpid() % 100_000}"  # this test run's own: parallel runs do not meet
CRASHING = f"""
import os, sys, time
from loadfleet.targets.netns import LabNetwork
net = LabNetwork(prefix="{CRASH_PREFIX}")
net.start()
proc = net.add_host("h1").spawn(["sleep", "300"])
print(net.tag, proc.pid, net.subnet, flush=True)
time.sleep(300)
"""


def test_cleanup_stale_removes_what_a_crashed_run_left(leftovers):
    crashed = subprocess.Popen(
        [sys.executable, "-c", CRASHING], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        tag, sleeper, subnet = crashed.stdout.readline().split()
        leftovers.pids.append(int(sleeper))
        os.kill(crashed.pid, signal.SIGKILL)
        crashed.wait(5)
        assert f"{tag}-h1" in list_namespaces(CRASH_PREFIX) and guard_present(check_subnet(subnet))
        with LabNetwork(prefix=CRASH_PREFIX) as live:  # a live network is left alone
            removed = cleanup_stale(CRASH_PREFIX)
            assert f"namespace {tag}-h1" in removed and f"guard route {subnet}" in removed
            assert live.bridge_netns in list_namespaces(CRASH_PREFIX) and guard_present(live.subnet)
        assert not any(n.startswith(f"{tag}-") for n in list_namespaces(CRASH_PREFIX))
        assert not (STATE_DIR / f"{tag}.json").exists()
        # Gone, unless a parallel test run has taken the freed subnet since.
        assert not guard_present(check_subnet(subnet)) or subnet in live_lab_subnets()
        assert not pid_alive(int(sleeper))
    finally:
        if crashed.poll() is None:
            os.killpg(crashed.pid, signal.SIGKILL)
            crashed.wait()
        cleanup_stale(CRASH_PREFIX)
    leftovers.check(live)


@pytest.mark.parametrize(
    "record",
    [
        {"pid": None},  # written by an early version of keep()
        {"pid": None, "owner": "/nonexistent/lab.json"},  # kept by an owner file that is gone
        {},  # no pid at all
    ],
)
def test_cleanup_stale_judges_records_without_a_live_pid_as_stale(record):
    """A record cleanup_stale cannot tie to a live creator or owner is stale: removed, no crash."""
    prefix = f"n{os.getpid() % 100_000}"
    tag = f"{prefix}-999999-1"
    state = STATE_DIR / f"{tag}.json"
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({**record, "tag": tag, "subnet": "10.231.255.248/29"}) + "\n")
    try:
        cleanup_stale(prefix)
        assert not state.exists()
    finally:
        state.unlink(missing_ok=True)


def test_a_kept_network_records_its_creator_and_its_owner(leftovers, tmp_path):
    owner, prefix = tmp_path / "lab.json", f"k{os.getpid() % 100_000}"
    with LabNetwork(prefix=prefix) as net:
        owner.write_text(json.dumps({"network": net.keep(owner)}))
        record = json.loads((STATE_DIR / f"{net.tag}.json").read_text())
        assert record["pid"] == os.getpid() and record["owner"] == str(owner)
        assert cleanup_stale(prefix) == []  # its owner names it: alive
    leftovers.check(net)


FETCH = """
import hashlib, json, sys, urllib.request
base, paths = sys.argv[1], json.loads(sys.argv[2])
print(json.dumps({p: hashlib.sha256(urllib.request.urlopen(base + p, timeout=10).read()).hexdigest() for p in paths}))
"""


def test_nginx_on_one_host_serves_an_nfs_export_of_another(leftovers, tmp_path):
    export = tmp_path / "export"
    manifest = generate_tree(export, scale=0.25, seed=3).to_json()
    sample = [f for f in manifest["files"] if f["path"].endswith(("_0.html", "_4.html", "_8.html"))]
    assert len(sample) >= 12 and len({f["class"] for f in sample}) == 4
    mount = None
    with LabNetwork() as net:
        try:
            nfs_host, web_host, client = net.add_host("nfs"), net.add_host("web"), net.add_host("client")
            ganesha = GaneshaServer(export, tmp_path / "ganesha", host=nfs_host.address, port=2049, launcher=nfs_host)
            ganesha.start()
            leftovers.pids.extend(ganesha.pids)  # its private D-Bus and ganesha
            # The FUSE process runs on the web host (its NFS traffic crosses the bridge); nsenter
            # keeps the mount table, so the mount is visible to nginx and to this test.
            mount = FuseMount(ganesha.url, tmp_path / "mnt", launcher=web_host)
            mount.start()
            leftovers.pids.append(mount.pid)
            web = NamespaceNginx(web_host, WEB_PORT, mount.mountpoint, tmp_path / "nginx", "web")
            web.start()
            leftovers.pids.append(web.pid)
            result = client.run([sys.executable, "-c", FETCH, web.url, json.dumps([f["path"] for f in sample])])
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout) == {f["path"]: f["sha256"] for f in sample}
            assert web.access_log_lines() == len(sample)
        finally:
            if mount:
                mount.stop()  # before the namespaces go: the FUSE process is the network's too
    assert not is_mounted(tmp_path / "mnt")
    leftovers.check(net)


# ---------------------------------------------------------------- the real system across hosts


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    leftovers = Leftovers()
    with LabNetwork() as net:
        system = FleetLab(net, tmp_path_factory.mktemp("netns-system"), leftovers)
        system.wait_for_agents({"a1", "a2", "web1-host"})
        yield system
        system.stop()
    leftovers.check(net)


def test_a_run_across_namespaces_counts_exactly_what_the_servers_served(system):
    before = system.served()
    code, summary, err = finish(system.start_run(system.plan(duration_s=3)))
    assert code == 0, err + system.logs()
    total = summary["total"]["figures"]
    assert total["requests"] > 500
    assert total["requests"] == system.served() - before
    assert total["ok"] == total["requests"] and total["failed"] == 0
    assert {a["name"] for a in summary["agents"]} == {"a1", "a2"}
    assert all(a["figures"]["requests"] > 0 for a in summary["agents"])
    # web1's host, seen by the monitor in its namespace: the responses left through its veth.
    [host] = summary["hosts"]
    assert host["host"] == "web1-host" and host["targets"] == [system.webs[0].url]
    assert host["net_tx_mb_per_s"] > 0 and host["process_cpu_pct"] > 0, host
    assert all(web.access_log_lines() > 0 for web in system.webs)
    # Each request came from an agent's namespace address.
    sources = {line.split()[0] for web in system.webs for line in web.access_log.read_text().splitlines()}
    assert sources == {host.address for host in system.hosts.values()}


def test_a_partitioned_agent_stops_its_engines_within_the_lease(system):
    system.wait_for_agents({"a1", "a2"})
    run = system.start_run(system.plan(duration_s=10))
    try:
        engines = system.wait_for_engines("a2")
        time.sleep(2 + 1)  # the barrier start is 2 s after the engines start; then 1 s of load
        host, agent = system.hosts["a2"], system.agents["a2"]
        system.net.cut(host)
        cut_at = time.monotonic()
        while any(pid_alive(pid) for pid in engines) and time.monotonic() - cut_at < 5:
            time.sleep(0.1)
        assert not any(pid_alive(pid) for pid in engines), "a2's load went on past its lease while partitioned"
        stopped_after_s = time.monotonic() - cut_at
        # The 3 s lease runs from the last renewal, which comes with each 1 s heartbeat.
        assert stopped_after_s >= 1.5, f"engines stopped {stopped_after_s:.1f} s after the cut: before the lease ended"
        assert pid_alive(agent.pid), "the agent itself stays, to redial"

        code, summary, err = finish(run)
        assert code == 0, err + system.logs()
        assert [e["agent_id"] for e in summary["events"] if e["kind"] == "agent_lost"] == ["a2"]
        by_agent = {a["name"]: a["figures"]["requests"] for a in summary["agents"]}
        assert by_agent["a1"] > 0  # a2's figures count only if its reports arrived before the cut
    finally:
        system.net.restore(system.hosts["a2"])
        if run.poll() is None:
            run.kill()
            run.wait()
    system.wait_for_agents({"a1", "a2"}, timeout_s=30)  # a2 redials once its link is back


def test_beyond_loopback_the_controller_serves_only_tls_with_certificates(system):
    """The namespace addresses are real non-loopback addresses: a plaintext controller refuses
    to serve on one, and the TLS controller refuses a plaintext client from another host."""
    refused = system.ctrl.run(
        [
            program("loadfleet"),
            "controller",
            "--listen",
            f"{system.ctrl.address}:{CONTROLLER_PORT + 1}",
            "--runs-dir",
            str(system.tmp / "runs-plain"),
        ],
        timeout=30,
    )
    assert refused.returncode == 2 and "refusing to listen" in refused.stderr, refused.stderr
    a1_host = system.hosts["a1"]
    plaintext = system.loadfleet("agents", host=a1_host, as_operator=False, timeout=30)
    assert plaintext.returncode == 1 and "cannot reach the controller" in plaintext.stderr, plaintext.stderr
    certified = system.loadfleet("agents", "--json", host=a1_host, timeout=30)
    assert certified.returncode == 0 and {"a1", "a2", "web1-host"} <= {
        a["agentId"] for a in json.loads(certified.stdout)
    }
