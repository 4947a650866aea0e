"""Restarting a running lab's servers on the same addresses and ports, so that a measurement
never inherits the previous one's server state (Apache's grown worker pool, Varnish's cache,
HAProxy's queues, MariaDB's buffers). The kernel's page cache is out of scope: it is shared
with the whole machine, and no server restart empties it.

`loadfleet-lab up` keeps a copy of the lab's spec in the state directory (SPEC_COPY); a
restart rebuilds the named servers from it with the ports recorded in lab.json, stops them
(dependents first) and starts them again (dependencies first). The NFS server and mounts of a
lab with `nfs:` stay up. In a lab with hosts (network namespaces) each server starts again on
its host, from the network recorded in lab.json (no namespace or guard route changes); the
hosts' monitors follow the servers by PID file.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .caps import CpuCap, CpuGroup
from .daemon import LabError, stop_pid
from .lab import STATE_FILE, Lab
from .netns import LabNetwork
from .spec import ServerSpec, load_spec

SPEC_COPY = "lab-spec.yaml"


class UnknownServers(LabError):
    """Server names that are not in the lab (a usage error: exit 2)."""

    def __init__(self, names: list[str], known: list[str]):
        super().__init__(f"no server named {', '.join(names)} in this lab (it has {', '.join(known)})")
        self.names = names


@dataclass(frozen=True)
class Restarted:
    """One server stopped and started again: its old and new PIDs and how long it took."""

    name: str
    kind: str
    url: str
    old_pids: tuple[int, ...]
    new_pids: tuple[int, ...]
    seconds: float


def restart_order(start_order: list[str], wanted: list[str]) -> tuple[list[str], list[str]]:
    """(stop order, start order) of the wanted servers (all when none is named), from the lab's
    start order, which puts databases before PHP and backends before balancers and caches.
    Dependents stop first, so that no balancer forwards to a backend that is going away."""
    unknown = [n for n in wanted if n not in start_order]
    if unknown:
        raise UnknownServers(unknown, start_order)
    chosen = set(wanted) or set(start_order)
    start = [n for n in start_order if n in chosen]
    return list(reversed(start)), start


def restart_lab(state_dir: Path, wanted: list[str]) -> list[Restarted]:
    """Restarts the wanted servers (all when empty) of the lab up in `state_dir`."""
    state_dir = Path(state_dir).resolve()
    copy = state_dir / SPEC_COPY
    if not copy.exists():
        raise LabError(f"no lab spec in {state_dir} ({SPEC_COPY}; was the lab started with loadfleet-lab up?)")
    spec = load_spec(copy)
    lab = Lab(spec, state_dir)
    state = lab.state()
    if lab.hosts:
        _reattach_hosts(lab, state)
    entries = {e["name"]: e for e in state.get("servers", [])}
    stop, start = restart_order([s.name for s in spec.servers], wanted)
    for name in stop:
        for pid in reversed(entries[name].get("pids") or [entries[name]["pid"]]):
            stop_pid(pid)
    lab.docroot = Path(state.get("docroot") or lab.docroot)

    def save() -> None:  # after every start, so that `down` stops what runs even if a later start fails
        state["servers"] = list(entries.values())
        (state_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")

    return _start(lab, entries, start, save)


def _start(lab: Lab, entries: dict[str, dict[str, Any]], start: list[str], save: Callable[[], None]) -> list[Restarted]:
    """Starts the `start` servers again, updating their lab.json entries with the new PIDs."""
    done = []
    for server_spec in lab.spec.servers:  # dependency order: every server's needs are built before it
        entry = entries[server_spec.name]
        began = time.monotonic()
        server = lab._build(_pinned(server_spec, entry))
        if server_spec.name in start:
            server.start()
            old = tuple(entry.get("pids") or [entry["pid"]])
            took = time.monotonic() - began
            done.append(Restarted(server.name, server.kind, server.url, old, tuple(server.pids), took))
            entry.update(pid=server.pid, pids=server.pids)
            save()
        lab.servers.append(server)  # running or not: dependents read its address and credentials
    return done


def _reattach_hosts(lab: Lab, state: dict[str, Any]) -> None:
    """The running lab's hosts as launchers (their namespaces and CPU caps, as `up` made them) and
    their NFS mounts, so that servers start again on the hosts they ran on."""
    assert lab.hosts is not None
    if not state.get("network"):
        raise LabError(f"lab.json in {lab.state_dir} records no network for the spec's hosts (is the lab up?)")
    net = LabNetwork.reattach(state["network"])
    for spec in lab.spec.hosts:
        # The same cgroup as at `up` (named by the network's tag and the host; create is idempotent).
        group = CpuGroup.create(f"{net.tag}-{spec.name}", spec.cpu_pct) if spec.cpu_pct else None
        lab.hosts.hosts[spec.name] = dataclasses.replace(
            net.hosts[spec.name], confine=CpuCap(spec.cpus, group).confine()
        )
    for entry in state.get("servers", []):
        if entry.get("mountpoint") and entry["name"].startswith("nfs-mount-"):
            lab.hosts.mounts[entry["name"].removeprefix("nfs-mount-")] = Path(entry["mountpoint"])


def _pinned(spec: ServerSpec, entry: dict[str, Any]) -> ServerSpec:
    """The spec with the port the server was given at `up` (a spec's port 0 means any free one)."""
    port = urlsplit(entry["url"]).port
    if port is None:
        raise LabError(f"lab.json has no port for server {spec.name} ({entry['url']})")
    return dataclasses.replace(spec, port=port)


def keep_spec(spec_path: Path, state_dir: Path) -> None:
    """Keeps a copy of the spec `up` started, for `restart`."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    (Path(state_dir) / SPEC_COPY).write_text(Path(spec_path).read_text())


__all__ = ["Restarted", "UnknownServers", "keep_spec", "restart_lab", "restart_order"]
