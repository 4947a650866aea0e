"""A lab: a workload and the servers that serve it, described by a small YAML spec (see
`spec.py` for its fields).

    workload: {kind: tree, scale: 1.0, seed: 1}
    servers:
      - {name: web1, kind: nginx, listen: 127.0.0.2:18081}
      - {name: web2, kind: nginx, listen: 127.0.0.3:0}     # 0: any free port
      - {name: lb, kind: haproxy, backends: [web1, web2], listen: 127.0.0.4:0}

Servers start in dependency order (backends before the balancers in front of them) and
stop in reverse. `up()` writes `lab.json` into the state directory (server names, kinds,
URLs, PIDs, and for a lab with hosts its network, cgroups and controller: hostlab.py), so that
`down()` from another process stops exactly what was started and removes the rest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from .apache import ApacheServer
from .caps import CpuCap, CpuGroup
from .daemon import LOCAL, LabError, Launcher, LocalLauncher, Upstream, free_port, pid_alive, stop_pid
from .fusemount import NGINX_OPEN_FILE_CACHE, FuseMount, is_mounted, unmount
from .haproxy import HaproxyServer
from .hostlab import NFS_PORT, FleetProcess, LabHosts, teardown
from .journeyapp import DEFAULT_WORKERS, JourneyApp
from .mariadb import MariaDbServer
from .nfs import GaneshaServer
from .nfsstats import ClientStats, client_stats
from .nginx import NginxServer
from .php import PhpServer
from .spec import KINDS, LabSpec, ServerSpec, SpecError, load_spec, parse_spec
from .tomcat import TomcatServer
from .varnish import VarnishServer
from .workload import generate, read_manifest
from .yaws import YawsServer

STATE_FILE = "lab.json"
# Kinds that serve the workload's files, so need the docroot (an NFS mount on their host).
FILE_KINDS = ("nginx", "apache", "php", "tomcat", "yaws")
# A server a spec names (ServerSpec.kind).
Server = (
    NginxServer
    | ApacheServer
    | PhpServer
    | TomcatServer
    | YawsServer
    | MariaDbServer
    | HaproxyServer
    | VarnishServer
    | JourneyApp
)


class Lab:
    """Context manager: the servers are up inside `with`, and stopped even on errors."""

    def __init__(self, spec: LabSpec, state_dir: Path):
        self.spec = spec
        self.state_dir = Path(state_dir).resolve()
        self.docroot = self.state_dir / "docroot"
        # Every part started, in order: the spec's servers, ganesha, FUSE mounts, the controller and
        # agents of a lab with hosts. No common base class: callers use what each kind has.
        self.servers: list[Any] = []
        self.hosts = LabHosts(spec, self.state_dir, self.state_dir / STATE_FILE) if spec.hosts else None
        self.groups: list[CpuGroup] = []  # CPU quotas of loopback servers
        self._placement: dict[str, str] = {}  # server name -> its lab host

    def __enter__(self) -> Lab:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        files = self.state_dir / ("export" if self.spec.nfs else "docroot")
        if not self.spec.workload.matches(read_manifest(files)):
            shutil.rmtree(files, ignore_errors=True)  # no files of an earlier workload stay
            generate(files, self.spec.workload)
        try:
            if self.hosts:
                self.hosts.start(self._save)
            if self.spec.nfs:
                self._mount_nfs(files)
            for spec in self.spec.servers:  # already in dependency order
                server = self._build(spec)
                server.start()
                self.servers.append(server)
                self._save()
            if self.hosts:
                self.hosts.start_fleet(self._add, self._served())
        except BaseException:
            self.down()
            raise

    def down(self) -> list[str]:
        """Stops every server this lab (or an earlier process, per lab.json) started, balancers
        first (the reverse of the start order)."""
        stopped = []
        for entry in reversed(self.status()):
            for pid in reversed(entry.get("pids") or [entry["pid"]]):
                stop_pid(pid)
            if entry.get("mountpoint") and is_mounted(Path(entry["mountpoint"])):
                unmount(Path(entry["mountpoint"]))  # its FUSE process was killed, not stopped
            stopped.append(entry["name"])
        problems = teardown(self.state())
        self.servers.clear()
        if problems:
            raise LabError("the lab left: " + "; ".join(problems))
        (self.state_dir / STATE_FILE).unlink(missing_ok=True)
        return stopped

    def status(self) -> list[dict[str, Any]]:
        """Servers recorded in lab.json in start order, each with whether all its PIDs are alive."""
        entries = self.state().get("servers", [])
        return [{**e, "alive": all(pid_alive(p) for p in e.get("pids") or [e["pid"]])} for e in entries]

    def state(self) -> dict[str, Any]:
        """lab.json as written by `up` (an empty dict without one)."""
        try:
            state: dict[str, Any] = json.loads((self.state_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return state

    def nfs_client_stats(self) -> dict[str, ClientStats]:
        """Per-client statistics of the lab's running NFS server (see nfsstats.py); empty
        without one. Works from another process too (the bus address is in lab.json)."""
        for entry in self.status():
            if entry.get("bus") and entry["alive"]:
                return client_stats(entry["bus"])
        return {}

    def server(self, name: str) -> Any:
        """The running server of that name."""
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(f"no server named '{name}' in this lab")

    @property
    def manifest(self) -> Path:
        """The workload's manifest at a path that stays put for plans to name: with an NFS
        docroot, the export's copy (the servers' mount point is new with every `up`)."""
        return self.state_dir / ("export" if self.spec.nfs else "docroot") / "manifest.json"

    def _mount_nfs(self, export: Path) -> None:
        """ganesha exports the files; the servers' docroot is a fresh FUSE mount of the export:
        one on loopback, or one per lab host with file servers (its NFS traffic crosses its link)."""
        nfs = self.hosts.host_of(lambda h: h.nfs) if self.hosts else None
        if nfs:
            ganesha = GaneshaServer(
                export, self.state_dir / "nfs-server", host=nfs[1].address, port=NFS_PORT, launcher=nfs[1]
            )
        elif self.spec.nfs_cpus:
            pinned = LocalLauncher(confine=CpuCap(self.spec.nfs_cpus).confine())
            ganesha = GaneshaServer(export, self.state_dir / "nfs-server", port=free_port("127.0.0.1"), launcher=pinned)
        else:
            ganesha = GaneshaServer(export, self.state_dir / "nfs-server")
        self._add(ganesha, host=nfs[0].name if nfs else None, start=True)
        if not self.hosts:
            self.docroot = self._mount(ganesha, "nfs-mount", self.state_dir, ganesha.launcher)
            return
        for name in dict.fromkeys(s.on for s in self.spec.servers if s.kind in FILE_KINDS and s.on):
            self.hosts.mounts[name] = self._mount(
                ganesha, f"nfs-mount-{name}", self.state_dir / name, self.hosts.hosts[name]
            )

    def _mount(self, ganesha: GaneshaServer, name: str, directory: Path, launcher: Launcher) -> Path:
        # A fresh mount point every time: a FUSE daemon unmounts its path by name when stopped.
        mount = FuseMount(
            ganesha.url,
            directory / f"nfs-mount-{time.time_ns()}",
            cache=self.spec.nfs_cache,
            launcher=None if launcher is LOCAL else launcher,  # a lab host's, or CPUs of docroot.cpus
            name=name,
        )
        self._add(mount, host=getattr(launcher, "name", None), start=True)
        return mount.mountpoint

    def _served(self) -> dict[str, list[Any]]:
        """Each lab host's servers (ganesha's too; not the NFS mounts, the hosts' clients), for
        its monitor."""
        served: dict[str, list[Any]] = {}
        for server in self.servers:
            host = self._placement.get(server.name)
            if host and not isinstance(server, FuseMount):
                served.setdefault(host, []).append(server)
        return served

    def _add(self, server: Any, *, host: str | None = None, start: bool = False) -> None:
        """Records a started server (or the lab's controller and agents: their `host`)."""
        if start:
            server.start()
        if isinstance(server, FleetProcess):
            host = server.on
        if host:
            self._placement[server.name] = host
        self.servers.append(server)
        self._save()

    def _build(self, spec: ServerSpec) -> Server:
        args, docroot, launcher = self._place(spec)
        common: dict[str, Any] = {"launcher": launcher}
        if spec.kind in FILE_KINDS:
            return self._web_server(spec, args, docroot, common)
        if spec.kind == "mariadb":
            return MariaDbServer(
                *args, self.state_dir, spec.name, seed=spec.seed, items=spec.items, categories=spec.categories, **common
            )
        if spec.kind == "journey":
            # The login, account and cart pages on the spec's mariadb (started before it).
            return JourneyApp(
                *args,
                self.state_dir,
                spec.name,
                database=self.server(spec.database or ""),
                workers=spec.workers or DEFAULT_WORKERS,
                users=spec.users,
                **common,
            )
        backends = [Upstream(b.name, b.host, b.port) for b in map(self.server, spec.backends)]
        if spec.kind == "haproxy":
            return HaproxyServer(*args, self.state_dir, spec.name, backends, front=spec.front, mode=spec.mode, **common)
        if spec.kind == "varnish":
            return VarnishServer(*args, self.state_dir, spec.name, backends, cache=spec.cache, **common)
        raise LabError(f"server kind '{spec.kind}' is not one of {', '.join(KINDS)}")

    def _place(self, spec: ServerSpec) -> tuple[tuple[str, int], Path, Launcher]:
        """Where a server runs: its address and port, its docroot and its launcher (a lab host,
        recorded as its placement, or this machine with the server's CPU caps)."""
        if spec.on:
            assert self.hosts is not None  # servers are placed on hosts in a lab with hosts only
            host = self.hosts.hosts[spec.on]
            self._placement[spec.name] = spec.on
            return (host.address, spec.port), self.hosts.mounts.get(spec.on, self.docroot), host
        return (spec.host, spec.port or free_port(spec.host)), self.docroot, self._capped(spec)

    def _web_server(self, spec: ServerSpec, args: tuple[str, int], docroot: Path, common: dict[str, Any]) -> Server:
        """A server of the docroot: one of FILE_KINDS."""
        if spec.kind == "nginx":
            # Over a warm NFS mount nginx keeps files open rather than opening each one per request.
            extra = NGINX_OPEN_FILE_CACHE if self.spec.nfs and self.spec.nfs_cache == "warm" else ""
            return NginxServer(
                *args,
                docroot,
                self.state_dir,
                spec.name,
                workers=spec.workers or 1,
                extra_conf=extra,
                tls=spec.tls,
                mtls=spec.mtls,
                profile=spec.profile,
                **common,
            )
        if spec.kind == "apache":
            return ApacheServer(
                *args,
                docroot,
                self.state_dir,
                spec.name,
                mpm=spec.mpm,
                profile=spec.profile,
                also_listen=spec.also_listen,
                **common,
            )
        if spec.kind == "php":
            database = self.server(spec.database) if spec.database else None
            return PhpServer(
                *args,
                docroot,
                self.state_dir,
                spec.name,
                front=spec.front,
                mpm=spec.mpm,
                workers=spec.workers,
                cost=spec.cost,
                database=database,
                max_age_s=spec.max_age_s,
                profile=spec.profile,
                **common,
            )
        if spec.kind == "tomcat":
            return TomcatServer(*args, docroot, self.state_dir, spec.name, **common)
        # The last of FILE_KINDS: yaws.
        return YawsServer(*args, docroot, self.state_dir, spec.name, also_listen=spec.also_listen, **common)

    def _capped(self, spec: ServerSpec) -> Launcher:
        """A loopback server's launcher: with its CPU caps, if it has any."""
        if not spec.cpus and not spec.cpu_pct:
            return LOCAL
        group = None
        if spec.cpu_pct:
            lab_id = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:10]
            group = CpuGroup.create(f"{lab_id}-{spec.name}", spec.cpu_pct)
            self.groups.append(group)
            self._save()
        return LocalLauncher(confine=CpuCap(spec.cpus, group).confine())

    def _save(self) -> None:
        state = {
            "docroot": str(self.docroot),
            "servers": [
                {
                    "name": s.name,
                    "kind": s.kind,
                    "url": s.url,
                    "pid": s.pid,
                    "pids": s.pids,
                    **({"bus": s.bus.address} if isinstance(s, GaneshaServer) else {}),
                    **({"mountpoint": str(s.mountpoint)} if isinstance(s, FuseMount) else {}),
                    **({"host": self._placement[s.name]} if s.name in self._placement else {}),
                }
                for s in self.servers
            ],
            "cgroups": [str(g.path) for g in self.groups],
        }
        if self.hosts:
            hosted = self.hosts.record()
            state.update(hosted, cgroups=state["cgroups"] + hosted["cgroups"])
        (self.state_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")


__all__ = ["KINDS", "Lab", "LabError", "LabSpec", "ServerSpec", "SpecError", "load_spec", "parse_spec"]
