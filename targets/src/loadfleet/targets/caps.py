"""CPU caps for lab servers and hosts: which CPUs they may run on (affinity) and how much CPU
time they may use (a quota, in percent of one CPU, through a cgroup of their own).

On a 2-core machine shared by load generator and servers, caps set the regime an experiment
runs in: a server pinned to one core and the generator to the other stand for the original's
separate machines; a quota makes a server as slow as the original's (a 500 MHz node, an
Athlon XP) so that it, not the generator, saturates first.

Caps are applied in the child before it execs (`CpuCap.confine()` for `daemon.spawn`), so the
program and every process or thread it makes start confined: nginx's `worker_processes auto`,
the JVM's and the Erlang VM's scheduler counts see the CPUs they may use.

The quota's cgroup: cgroup v2 (`cpu.max`) where the unified hierarchy has the cpu controller,
else v1 (`cpu.cfs_quota_us` under /sys/fs/cgroup/cpu). Each group is made by `CpuGroup.create()`
under `loadfleet-lab/` and removed by `remove()` once its processes are gone.

Errors: `LabError` (from `daemon`) when no cgroup with a CPU controller can be made.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .daemon import LabError

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_DIR = "loadfleet-lab"
PERIOD_US = 100_000
REMOVE_TIMEOUT_S = 5.0


def machine_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (what caps may choose from)."""
    return tuple(sorted(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class CpuGroup:
    """A cgroup holding a CPU quota: `cpu_pct` percent of one CPU (200 = two CPUs' worth)."""

    path: Path
    cpu_pct: int

    @classmethod
    def create(cls, name: str, cpu_pct: int) -> CpuGroup:
        base = _base()
        path = base / name
        path.mkdir(exist_ok=True)
        quota_us = PERIOD_US * cpu_pct // 100
        if (path / "cpu.max").exists():
            (path / "cpu.max").write_text(f"{quota_us} {PERIOD_US}\n")
        else:
            (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (path / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
        return cls(path, cpu_pct)

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs.read_text().split()]
        except OSError:
            return []

    def quota_us(self) -> int | None:
        """The group's CPU time per `PERIOD_US`, as the kernel holds it (None: unlimited)."""
        if (self.path / "cpu.max").exists():
            quota = (self.path / "cpu.max").read_text().split()[0]
        else:
            quota = (self.path / "cpu.cfs_quota_us").read_text().strip()
        return None if quota in ("max", "-1") else int(quota)

    def throttled(self) -> int:
        """How many periods the group ran out of quota (cpu.stat nr_throttled)."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "nr_throttled":
                return int(value)
        return 0

    def remove(self) -> None:
        """Removes the group once its processes are gone (the caller stopped them); idempotent."""
        remove_group(self.path)


def remove_group(path: Path) -> None:
    deadline = time.monotonic() + REMOVE_TIMEOUT_S
    while path.exists():
        try:
            path.rmdir()
        except FileNotFoundError:
            return
        except OSError as exc:  # EBUSY while exiting processes leave it
            if time.monotonic() > deadline:
                raise LabError(f"cannot remove cgroup {path}: {exc.strerror}") from exc
            time.sleep(0.1)


@dataclass(frozen=True)
class CpuCap:
    """CPUs a server or host may run on (empty: any) and its quota's group (None: no quota)."""

    cpus: tuple[int, ...] = ()
    group: CpuGroup | None = None

    def confine(self) -> Callable[[], None] | None:
        """What a child runs before exec (daemon.spawn's `preexec`); None when nothing is capped."""
        if not self.cpus and self.group is None:
            return None
        cpus, procs = set(self.cpus), self.group.procs if self.group else None

        def confine() -> None:
            if cpus:
                os.sched_setaffinity(0, cpus)
            if procs:
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))

        return confine


def _base() -> Path:
    """`loadfleet-lab/` in the hierarchy that has the cpu controller, made on first use."""
    unified = CGROUP_ROOT / "cgroup.controllers"
    if unified.exists() and "cpu" in unified.read_text().split():
        base = CGROUP_ROOT / GROUP_DIR
        _enable_cpu(CGROUP_ROOT)
        base.mkdir(exist_ok=True)
        _enable_cpu(base)
        return base
    v1 = CGROUP_ROOT / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        base = v1 / GROUP_DIR
        base.mkdir(exist_ok=True)
        return base
    raise LabError(
        "no cgroup with a CPU controller (cgroup v2 cpu.max or v1 /sys/fs/cgroup/cpu) for cpu_pct; "
        "use cpus (affinity) alone"
    )


def _enable_cpu(group: Path) -> None:
    control = group / "cgroup.subtree_control"
    if "cpu" not in control.read_text().split():
        try:
            control.write_text("+cpu\n")
        except OSError as exc:
            raise LabError(f"cannot enable the cpu controller in {group}: {exc.strerror}") from exc


__all__ = ["CpuCap", "CpuGroup", "machine_cpus", "remove_group"]
