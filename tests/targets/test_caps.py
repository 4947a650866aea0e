"""CPU caps of lab servers (loadfleet.targets.caps): a server with `cpus` runs, all its processes,
on those CPUs only; one with `cpu_pct` uses no more CPU time than its quota, measured while a
CPU-bound page is loaded (bounded: 4 clients for about 2 s)."""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from loadfleet.targets.caps import CpuGroup, machine_cpus
from loadfleet.targets.lab import Lab, parse_spec
from loadfleet.targets.spec import SpecError
from support.procs import pid_alive

CLK_TCK = os.sysconf("SC_CLK_TCK")
QUOTA_PCT = 10
LOAD_S = 2.0
CLIENTS = 4


def allowed_cpus(pid: int) -> set[int]:
    return os.sched_getaffinity(pid)


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (nginx's workers, PHP-FPM's children)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of the processes (utime, stime; their exited children's are not counted)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def test_a_server_with_cpus_runs_all_its_processes_on_them(open_dir):
    cpu = max(machine_cpus())
    spec = parse_spec(
        {
            "workload": {"kind": "single"},
            "servers": [
                {"name": "pinned", "kind": "nginx", "workers": 2, "cpus": [cpu], "listen": "127.0.0.2:0"},
                {"name": "free", "kind": "nginx", "listen": "127.0.0.3:0"},
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        pinned = process_tree(lab.server("pinned").pid)
        assert len(pinned) == 3  # the master and its two workers
        assert all(allowed_cpus(p) == {cpu} for p in pinned)
        assert allowed_cpus(lab.server("free").pid) == set(machine_cpus())


@pytest.mark.skipif(os.geteuid() != 0, reason="a CPU quota needs a cgroup of its own (root)")
def test_a_server_with_cpu_pct_uses_no_more_cpu_than_its_quota(open_dir):
    spec = parse_spec(
        {
            "workload": {"kind": "single"},
            "servers": [
                {
                    "name": "capped",
                    "kind": "php",
                    "workers": CLIENTS,
                    "cost": 20_000,
                    "cpu_pct": QUOTA_PCT,
                    "listen": "127.0.0.2:0",
                }
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        server = lab.server("capped")
        group = CpuGroup(Path(lab.state()["cgroups"][0]), QUOTA_PCT)
        assert group.quota_us() == QUOTA_PCT * 1000
        pids = process_tree(server.pool.pid) + process_tree(server.front.pid)
        assert set(pids) <= set(group.pids()), "a process of the server is outside its group"
        served = []
        stop_at = time.monotonic() + LOAD_S + 1.0

        def client() -> None:
            while time.monotonic() < stop_at and len(served) < 10_000:  # bounded in time and count
                with urllib.request.urlopen(server.page_url, timeout=15) as response:
                    served.append(response.status)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # the clients are busy: measure in the middle of the load
        throttled, cpu_0, wall_0 = group.throttled(), cpu_seconds(pids), time.monotonic()
        time.sleep(LOAD_S)
        cpu_s, wall_s = cpu_seconds(pids) - cpu_0, time.monotonic() - wall_0
        throttled = group.throttled() - throttled
        for t in threads:
            t.join(30)
        assert served and set(served) == {200}
        # The quota: 10 % of one CPU. Allow a period's rounding and the clock tick's granularity.
        assert cpu_s <= wall_s * QUOTA_PCT / 100 * 1.5 + 0.05, (cpu_s, wall_s)
        assert throttled > 0  # the group hit its quota: the load wanted more
        server_pids = server.pids
    assert not group.path.exists(), "down left the server's cgroup"
    assert not any(pid_alive(p) for p in server_pids)


@pytest.mark.parametrize(
    "caps, problem",
    [
        ({"cpus": [999]}, "cpus"),
        ({"cpus": []}, "cpus"),
        ({"cpu_pct": 0}, "cpu_pct"),
        ({"cpu_pct": "half"}, "cpu_pct"),
    ],
)
def test_bad_caps_are_named_by_field(caps, problem):
    with pytest.raises(SpecError) as caught:
        parse_spec({"servers": [{"name": "w", "listen": "127.0.0.2:0", **caps}]})
    assert any(p.startswith(f"servers[0].{problem}") for p in caught.value.problems), caught.value.problems
