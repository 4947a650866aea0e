"""A lab: a workload tree and the servers that serve it, described by a small YAML spec.

    workload: {scale: 1.0, seed: 1}
    servers:
      - {name: web1, kind: nginx, listen: 127.0.0.2:18081}
      - {name: web2, kind: nginx, listen: 127.0.0.3:0}     # 0: any free port

`up()` writes `lab.json` into the state directory (server names, URLs, PIDs), so that
`down()` from another process stops exactly what was started.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

import yaml

from .nginx import LabError, NginxServer, check_loopback, stop_pid, _alive
from .workload import generate_tree, read_manifest

KINDS = ("nginx",)
STATE_FILE = "lab.json"


class SpecError(Exception):
    """The spec is wrong; `problems` name each field."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ServerSpec:
    name: str
    kind: str
    host: str
    port: int


@dataclass(frozen=True)
class LabSpec:
    scale: float
    seed: int
    servers: tuple[ServerSpec, ...]


def load_spec(path: Path) -> LabSpec:
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise SpecError([f"cannot read {path}: {exc.strerror}"]) from exc
    except yaml.YAMLError as exc:
        raise SpecError([f"{path} is not valid YAML: {exc}"]) from exc
    return parse_spec(doc)


def parse_spec(doc) -> LabSpec:
    if not isinstance(doc, dict):
        raise SpecError(["a lab spec must be a mapping"])
    problems: list[str] = []
    workload = doc.get("workload", {}) or {}
    scale, seed = workload.get("scale", 1.0), workload.get("seed", 1)
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or scale <= 0:
        problems.append(f"workload.scale: {scale!r} must be a number above 0")
    if not isinstance(seed, int) or isinstance(seed, bool):
        problems.append(f"workload.seed: {seed!r} must be an integer")
    servers = doc.get("servers")
    if not isinstance(servers, list) or not servers:
        problems.append("servers: give a list of at least one server")
        servers = []
    parsed, names = [], set()
    for i, entry in enumerate(servers):
        where = f"servers[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be a mapping")
            continue
        name, kind, listen = entry.get("name", f"web{i + 1}"), entry.get("kind", "nginx"), entry.get("listen")
        if name in names:
            problems.append(f"{where}.name: '{name}' is used twice")
        names.add(name)
        if kind not in KINDS:
            problems.append(f"{where}.kind: '{kind}' is not one of {', '.join(KINDS)}")
        host, port = _split_listen(str(listen or ""))
        if not listen or port is None:
            problems.append(f"{where}.listen: {listen!r} must be HOST:PORT")
            continue
        try:
            check_loopback(host)
        except ValueError as exc:
            problems.append(f"{where}.listen: {exc}")
            continue
        parsed.append(ServerSpec(str(name), kind, host, port))
    if problems:
        raise SpecError(problems)
    return LabSpec(float(scale), seed, tuple(parsed))


def _split_listen(listen: str) -> tuple[str, int | None]:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    return host, int(port) if port.isdigit() and int(port) < 65536 else None


class Lab:
    """Context manager: the servers are up inside `with`, and stopped even on errors."""

    def __init__(self, spec: LabSpec, state_dir: Path):
        self.spec = spec
        self.state_dir = Path(state_dir).resolve()
        self.docroot = self.state_dir / "docroot"
        self.servers: list[NginxServer] = []

    def __enter__(self) -> Lab:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        existing = read_manifest(self.docroot)
        if not existing or (existing.get("seed"), existing.get("scale")) != (self.spec.seed, self.spec.scale):
            generate_tree(self.docroot, scale=self.spec.scale, seed=self.spec.seed)
        try:
            for server in self.spec.servers:
                port = server.port or _free_port(server.host)
                nginx = NginxServer(server.host, port, self.docroot, self.state_dir, server.name)
                nginx.start()
                self.servers.append(nginx)
                self._save()
        except BaseException:
            self.down()
            raise

    def down(self) -> list[str]:
        """Stops every server this lab (or an earlier process, per lab.json) started."""
        stopped = []
        for entry in self.status():
            stop_pid(entry["pid"])
            stopped.append(entry["name"])
        self.servers.clear()
        (self.state_dir / STATE_FILE).unlink(missing_ok=True)
        return stopped

    def status(self) -> list[dict]:
        """Servers recorded in lab.json, each with whether its PID is alive."""
        try:
            entries = json.loads((self.state_dir / STATE_FILE).read_text())["servers"]
        except (OSError, ValueError, KeyError):
            return []
        return [{**e, "alive": _alive(e["pid"])} for e in entries]

    @property
    def manifest(self) -> Path:
        return self.docroot / "manifest.json"

    def _save(self) -> None:
        state = {"docroot": str(self.docroot),
                 "servers": [{"name": s.name, "url": s.url, "pid": s.pid} for s in self.servers]}
        (self.state_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


__all__ = ["Lab", "LabError", "LabSpec", "SpecError", "load_spec", "parse_spec"]
