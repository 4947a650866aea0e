"""A lab: a workload and the servers that serve it, described by a small YAML spec (see
`spec.py` for its fields).

    workload: {kind: tree, scale: 1.0, seed: 1}
    servers:
      - {name: web1, kind: nginx, listen: 127.0.0.2:18081}
      - {name: web2, kind: nginx, listen: 127.0.0.3:0}     # 0: any free port
      - {name: lb, kind: haproxy, backends: [web1, web2], listen: 127.0.0.4:0}

Servers start in dependency order (backends before the balancers in front of them) and
stop in reverse. `up()` writes `lab.json` into the state directory (server names, kinds,
URLs, PIDs), so that `down()` from another process stops exactly what was started.
"""
from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

from .apache import ApacheServer
from .daemon import LabError, Upstream, pid_alive, stop_pid
from .fusemount import NGINX_OPEN_FILE_CACHE, FuseMount
from .haproxy import HaproxyServer
from .mariadb import MariaDbServer
from .nfs import GaneshaServer
from .nfsstats import ClientStats, client_stats
from .nginx import NginxServer
from .php import PhpServer
from .spec import KINDS, LabSpec, ServerSpec, SpecError, load_spec, parse_spec
from .tomcat import TomcatServer
from .varnish import VarnishServer
from .yaws import YawsServer
from .workload import generate, read_manifest

STATE_FILE = "lab.json"


class Lab:
    """Context manager: the servers are up inside `with`, and stopped even on errors."""

    def __init__(self, spec: LabSpec, state_dir: Path):
        self.spec = spec
        self.state_dir = Path(state_dir).resolve()
        self.docroot = self.state_dir / "docroot"
        self.servers: list = []

    def __enter__(self) -> Lab:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        files = self.state_dir / ("export" if self.spec.nfs else "docroot")
        if not self.spec.workload.matches(read_manifest(files)):
            shutil.rmtree(files, ignore_errors=True)  # no files of an earlier workload stay
            generate(files, self.spec.workload)
        try:
            if self.spec.nfs:
                self._mount_nfs(files)
            for spec in self.spec.servers:  # already in dependency order
                server = self._build(spec)
                server.start()
                self.servers.append(server)
                self._save()
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
            stopped.append(entry["name"])
        self.servers.clear()
        (self.state_dir / STATE_FILE).unlink(missing_ok=True)
        return stopped

    def status(self) -> list[dict]:
        """Servers recorded in lab.json in start order, each with whether all its PIDs are alive."""
        try:
            entries = json.loads((self.state_dir / STATE_FILE).read_text())["servers"]
        except (OSError, ValueError, KeyError):
            return []
        return [{**e, "alive": all(pid_alive(p) for p in e.get("pids") or [e["pid"]])} for e in entries]

    def nfs_client_stats(self) -> dict[str, ClientStats]:
        """Per-client statistics of the lab's running NFS server (see nfsstats.py); empty
        without one. Works from another process too (the bus address is in lab.json)."""
        for entry in self.status():
            if entry.get("bus") and entry["alive"]:
                return client_stats(entry["bus"])
        return {}

    def server(self, name: str):
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
        """ganesha exports the files; the servers' docroot is a fresh FUSE mount of the export."""
        ganesha = GaneshaServer(export, self.state_dir / "nfs-server")
        ganesha.name = "nfs-server"
        ganesha.start()
        self.servers.append(ganesha)
        self._save()
        # A fresh mount point every time: a FUSE daemon unmounts its path by name when stopped.
        mount = FuseMount(ganesha.url, self.state_dir / f"nfs-mount-{time.time_ns()}")
        mount.name, mount.kind = "nfs-mount", "fuse"
        mount.start()
        self.servers.append(mount)
        self._save()
        self.docroot = mount.mountpoint

    def _build(self, spec: ServerSpec):
        port = spec.port or _free_port(spec.host)
        args = (spec.host, port)
        if spec.kind == "nginx":
            # Over NFS, nginx keeps files open rather than opening each one per request.
            extra = NGINX_OPEN_FILE_CACHE if self.spec.nfs else ""
            return NginxServer(*args, self.docroot, self.state_dir, spec.name, workers=spec.workers or 1,
                               extra_conf=extra, tls=spec.tls)
        if spec.kind == "apache":
            return ApacheServer(*args, self.docroot, self.state_dir, spec.name, mpm=spec.mpm)
        if spec.kind == "php":
            database = self.server(spec.database) if spec.database else None
            return PhpServer(*args, self.docroot, self.state_dir, spec.name, front=spec.front,
                             workers=spec.workers, cost=spec.cost, database=database)
        if spec.kind == "tomcat":
            return TomcatServer(*args, self.docroot, self.state_dir, spec.name)
        if spec.kind == "yaws":
            return YawsServer(*args, self.docroot, self.state_dir, spec.name)
        if spec.kind == "mariadb":
            return MariaDbServer(*args, self.state_dir, spec.name, seed=spec.seed, items=spec.items,
                                 categories=spec.categories)
        backends = [Upstream(b.name, b.host, b.port) for b in map(self.server, spec.backends)]
        if spec.kind == "haproxy":
            return HaproxyServer(*args, self.state_dir, spec.name, backends)
        if spec.kind == "varnish":
            return VarnishServer(*args, self.state_dir, spec.name, backends, cache=spec.cache)
        raise LabError(f"server kind '{spec.kind}' is not one of {', '.join(KINDS)}")

    def _save(self) -> None:
        state = {"docroot": str(self.docroot),
                 "servers": [{"name": s.name, "kind": s.kind, "url": s.url, "pid": s.pid, "pids": s.pids,
                              **({"bus": s.bus.address} if isinstance(s, GaneshaServer) else {})}
                             for s in self.servers]}
        (self.state_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


__all__ = ["KINDS", "Lab", "LabError", "LabSpec", "ServerSpec", "SpecError", "load_spec", "parse_spec"]
