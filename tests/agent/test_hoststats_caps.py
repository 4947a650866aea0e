"""A process group's CPU cap (hoststats.CpuCaps): its CPUs and its cgroup's quota, read from
fake /proc and /sys/fs/cgroup trees laid out as cgroup v2, v1 and the two together."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loadfleet.agent.hoststats import (
    CpuCaps,
    HostFigures,
    HostSampler,
    ProcessFigures,
    ProcessGroup,
    allowed_cpus,
    cpu_list,
    quota_pct_v1,
    quota_pct_v2,
)
from loadfleet.agent.session import host_to_proto

V2_CGROUP = "0::/lab/web1\n"
V1_CGROUP = "4:memory:/x\n2:cpu,cpuacct:/lab/web1\n1:name=systemd:/\n0::/\n"


def status(cpus: str) -> str:
    return f"Name:\tnginx\nPid:\t1\nCpus_allowed:\tf\nCpus_allowed_list:\t{cpus}\nMems_allowed_list:\t0\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_proc(root: Path, pid: int, cpus: str, cgroup: str) -> None:
    write(root / "proc" / str(pid) / "status", status(cpus))
    write(root / "proc" / str(pid) / "cgroup", cgroup)


def v2_tree(root: Path, web1_max: str, lab_max: str = "max 100000") -> None:
    cg = root / "cgroup"
    write(cg / "cgroup.controllers", "cpuset cpu io memory pids\n")  # the root has no cpu.max
    write(cg / "lab" / "cpu.max", f"{lab_max}\n")
    write(cg / "lab" / "web1" / "cpu.max", f"{web1_max}\n")


def v1_tree(root: Path, quota_us: str, period_us: str = "100000") -> None:
    cpu = root / "cgroup" / "cpu,cpuacct"
    write(cpu / "cpu.cfs_quota_us", "-1\n")
    write(cpu / "cpu.cfs_period_us", "100000\n")
    write(cpu / "lab" / "web1" / "cpu.cfs_quota_us", f"{quota_us}\n")
    write(cpu / "lab" / "web1" / "cpu.cfs_period_us", f"{period_us}\n")


def caps(root: Path) -> CpuCaps:
    return CpuCaps(proc_root=root / "proc", cgroup_root=root / "cgroup")


@pytest.mark.parametrize(
    "text, cpus",
    [("0-3", {0, 1, 2, 3}), ("0-1,3,8-9", {0, 1, 3, 8, 9}), ("5", {5}), ("", set()), ("zero", set())],
)
def test_a_kernel_cpu_list_is_read_as_its_cpus(text, cpus):
    assert cpu_list(text) == cpus


def test_the_allowed_cpus_come_from_proc_status_and_none_without_the_line():
    assert allowed_cpus(status("0-1")) == {0, 1}
    assert allowed_cpus("Name:\tnginx\n") == set()


@pytest.mark.parametrize(
    "cpu_max, pct",
    [("50000 100000", 50.0), ("200000 100000", 200.0), ("max 100000", None), ("", None), ("x y", None)],
)
def test_a_v2_cpu_max_is_a_percent_of_one_core(cpu_max, pct):
    assert quota_pct_v2(cpu_max) == pct


@pytest.mark.parametrize(
    "quota, period, pct",
    [("25000", "100000", 25.0), ("150000\n", "100000\n", 150.0), ("-1", "100000", None), ("1000", "0", None)],
)
def test_a_v1_cfs_quota_is_a_percent_of_one_core(quota, period, pct):
    assert quota_pct_v1(quota, period) == pct


def test_affinity_alone_is_the_cap_without_a_quota(tmp_path):
    fake_proc(tmp_path, 10, "0-2", V2_CGROUP)
    v2_tree(tmp_path, "max 100000")
    assert caps(tmp_path).cap_pct([10], cores=8) == 300.0
    # An affinity naming more CPUs than the host has (possible, not online) counts the host's.
    assert caps(tmp_path).cap_pct([10], cores=2) == 200.0


def test_a_v2_quota_under_the_cpus_is_the_cap(tmp_path):
    fake_proc(tmp_path, 10, "0-3", V2_CGROUP)
    v2_tree(tmp_path, "50000 100000")
    assert caps(tmp_path).cap_pct([10], cores=4) == 50.0


def test_a_parents_quota_binds_its_children(tmp_path):
    fake_proc(tmp_path, 10, "0-3", V2_CGROUP)
    v2_tree(tmp_path, "max 100000", lab_max="150000 100000")
    assert caps(tmp_path).cap_pct([10], cores=4) == 150.0


def test_a_quota_over_the_cpus_leaves_the_cpus_as_the_cap(tmp_path):
    fake_proc(tmp_path, 10, "1", V2_CGROUP)
    v2_tree(tmp_path, "300000 100000")
    assert caps(tmp_path).cap_pct([10], cores=4) == 100.0


def test_a_v1_quota_is_read_from_the_cpu_hierarchy(tmp_path):
    fake_proc(tmp_path, 10, "0-1", V1_CGROUP)
    v1_tree(tmp_path, "25000")
    # A v2 hierarchy beside v1 (systemd's hybrid layout) without the cpu controller counts nothing.
    write(tmp_path / "cgroup" / "unified" / "cgroup.controllers", "\n")
    assert caps(tmp_path).cap_pct([10], cores=2) == 25.0


def test_a_v1_quota_of_minus_one_is_none(tmp_path):
    fake_proc(tmp_path, 10, "0-1", V1_CGROUP)
    v1_tree(tmp_path, "-1")
    assert caps(tmp_path).cap_pct([10], cores=2) == 200.0


def test_processes_in_two_quotad_cgroups_add_their_quotas_and_cpus(tmp_path):
    v2_tree(tmp_path, "50000 100000")
    write(tmp_path / "cgroup" / "lab" / "web2" / "cpu.max", "30000 100000\n")
    fake_proc(tmp_path, 10, "0", V2_CGROUP)
    fake_proc(tmp_path, 11, "0", V2_CGROUP)  # web1's worker: the same cgroup counts once
    fake_proc(tmp_path, 20, "1", "0::/lab/web2\n")
    assert caps(tmp_path).cap_pct([10, 11, 20], cores=4) == 80.0


def test_one_process_without_a_quota_leaves_the_group_without_one(tmp_path):
    v2_tree(tmp_path, "50000 100000")
    fake_proc(tmp_path, 10, "0", V2_CGROUP)
    fake_proc(tmp_path, 20, "1", "0::/\n")
    assert caps(tmp_path).cap_pct([10, 20], cores=4) == 200.0


def test_a_cgroup_outside_this_namespaces_view_has_no_quota_read(tmp_path):
    """A process in another cgroup namespace's tree shows a path above our root ("/../x")."""
    v2_tree(tmp_path, "50000 100000")
    write(tmp_path / "lab" / "web1" / "cpu.max", "10000 100000\n")  # beside the cgroup root: never read
    fake_proc(tmp_path, 10, "0-1", "0::/../lab/web1\n")
    assert caps(tmp_path).cap_pct([10], cores=2) == 200.0


def test_unreadable_files_make_the_cap_unknown(tmp_path):
    v2_tree(tmp_path, "50000 100000")
    assert caps(tmp_path).cap_pct([10], cores=4) == 0.0  # no /proc/10: the process is gone
    write(tmp_path / "proc" / "10" / "status", status("0-1"))
    assert caps(tmp_path).cap_pct([10], cores=4) == 0.0  # its cgroup file is missing
    write(tmp_path / "proc" / "10" / "cgroup", V2_CGROUP)
    (tmp_path / "proc" / "10" / "status").write_text("Name:\tnginx\n")
    assert caps(tmp_path).cap_pct([10], cores=4) == 0.0  # no Cpus_allowed_list
    assert caps(tmp_path).cap_pct([], cores=4) == 0.0  # no process at all


def test_an_unreadable_quota_leaves_the_cpus_as_the_cap(tmp_path):
    fake_proc(tmp_path, 10, "0-1", V2_CGROUP)
    v2_tree(tmp_path, "max 100000")
    (tmp_path / "cgroup" / "lab" / "web1" / "cpu.max").unlink()
    (tmp_path / "cgroup" / "lab" / "web1" / "cpu.max").mkdir()  # reading it fails (EISDIR)
    assert caps(tmp_path).cap_pct([10], cores=4) == 200.0


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux's /proc")
def test_this_process_is_capped_by_its_real_cpus(tmp_path):
    """On this real host: at most the CPUs it may run on (a quota may make it less), never 0."""
    pid_file = tmp_path / "me.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    [me] = HostSampler((ProcessGroup("me", pid_file),)).sample().processes
    assert 0 < me.cap_pct <= 100 * len(os.sched_getaffinity(0))


def test_the_cap_goes_into_the_heartbeat():
    figures = HostFigures(
        cores=4,
        cpu_pct=30.0,
        mem_used_pct=40.0,
        net_rx_bytes_per_s=0.0,
        net_tx_bytes_per_s=0.0,
        tcp_established=3,
        processes=(ProcessFigures("nginx", 2, 49.5, 12.0, cap_pct=50.0),),
    )
    [nginx] = host_to_proto(figures).processes
    assert (nginx.name, nginx.cpu_pct, nginx.cap_pct) == ("nginx", 49.5, 50.0)
