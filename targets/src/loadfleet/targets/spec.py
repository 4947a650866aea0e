"""The lab spec: a declarative YAML description of a workload and the servers serving it,
validated as a whole (every problem names its field; nothing is started on a bad spec).

    workload: {kind: tree, scale: 1.0, seed: 1}        # or single, files30k, files100k
    servers:
      - {name: web1, kind: nginx, listen: "127.0.0.2:0"}            # 0: any free port
      - {name: web2, kind: apache, mpm: event, listen: "127.0.0.3:0"}
      - {name: app, kind: php, front: nginx, cost: 1000, listen: "127.0.0.4:0"}
      - {name: lb, kind: haproxy, backends: [web1, web2], listen: "127.0.0.5:0"}
      - {name: cache, kind: varnish, backends: [web1, web2], cache: true, listen: "127.0.0.6:0"}
      - {name: db, kind: mariadb, seed: 1, items: 5000, categories: 50, listen: "127.0.0.7:0"}
      - {name: shop, kind: php, database: db, listen: "127.0.0.8:0"}
      - {name: java, kind: tomcat, listen: "127.0.0.9:0"}
      - {name: erlang, kind: yaws, listen: "127.0.0.10:0"}

Load balancers (haproxy, varnish) name their backends, a php server its database;
`LabSpec.servers` comes in start order, every server after the ones it needs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .apache import DEFAULT_MPM, MPMS
from .daemon import check_loopback
from .mariadb import DEFAULT_CATEGORIES, DEFAULT_ITEMS, DEFAULT_SEED, MAX_ROWS
from .php import DEFAULT_COST, DEFAULT_FRONT, FRONTS, MAX_COST
from .varnish import DEFAULT_CACHE
from .workload import WORKLOAD_KINDS, WorkloadSpec

KINDS = ("nginx", "apache", "php", "haproxy", "varnish", "mariadb", "tomcat", "yaws")
BALANCERS = ("haproxy", "varnish")
HTTP_KINDS = ("nginx", "apache", "php", "haproxy", "varnish", "tomcat", "yaws")
COMMON_FIELDS = ("name", "kind", "listen")
# Fields each server kind takes besides name, kind and listen.
KIND_FIELDS = {
    "nginx": ("workers", "tls"),
    "apache": ("mpm",),
    "php": ("front", "workers", "cost", "database"),
    "haproxy": ("backends",),
    "varnish": ("backends", "cache"),
    "mariadb": ("seed", "items", "categories"),
    "tomcat": (),
    "yaws": (),
}
WORKLOAD_FIELDS = {"tree": ("scale",), "single": ("bytes",), "files30k": ("count",), "files100k": ("count",)}
MAX_WORKERS = 256


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
    workers: int | None = None          # nginx worker processes, PHP-FPM children
    tls: bool = False                   # nginx: https with a self-signed certificate
    mpm: str = DEFAULT_MPM              # apache
    front: str = DEFAULT_FRONT          # php: nginx or apache
    cost: int = DEFAULT_COST            # php: SHA-256 rounds per page by default
    backends: tuple[str, ...] = ()      # haproxy, varnish: names of other servers
    cache: bool = DEFAULT_CACHE         # varnish
    database: str | None = None         # php: name of a mariadb server, for the database pages
    seed: int = DEFAULT_SEED            # mariadb: same seed, same rows
    items: int = DEFAULT_ITEMS          # mariadb: rows of `items`
    categories: int = DEFAULT_CATEGORIES  # mariadb: rows of `categories`

    @property
    def needs(self) -> tuple[str, ...]:
        """Servers that must be up before this one."""
        return self.backends + ((self.database,) if self.database else ())


@dataclass(frozen=True)
class LabSpec:
    workload: WorkloadSpec
    servers: tuple[ServerSpec, ...]
    # True: the workload is exported by nfs-ganesha and the servers read it through an NFS
    # mount (FUSE here; a kernel mount on real hosts), as in the classic cluster studies.
    nfs: bool = False

    # The tree's fields, as earlier versions of the spec had them.
    @property
    def scale(self) -> float:
        return self.workload.scale

    @property
    def seed(self) -> int:
        return self.workload.seed


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
    for key in doc:
        if key not in ("workload", "servers", "docroot"):
            problems.append(f"{key}: not a field of a lab spec (workload, servers, docroot)")
    nfs = _docroot_nfs(doc.get("docroot", {}), problems)
    workload = _workload(doc.get("workload") or {}, problems)
    entries = doc.get("servers")
    if not isinstance(entries, list) or not entries:
        problems.append("servers: give a list of at least one server")
        entries = []
    servers = [s for i, entry in enumerate(entries) if (s := _server(i, entry, problems))]
    problems += _backend_problems(servers, entries) + _listen_problems(servers)
    if problems:
        raise SpecError(problems)
    return LabSpec(workload, tuple(_start_order(servers)), nfs=nfs)


def _docroot_nfs(doc, problems: list[str]) -> bool:
    if not isinstance(doc, dict) or set(doc) - {"nfs"} or not isinstance(doc.get("nfs", False), bool):
        problems.append("docroot: must be {nfs: true|false}")
        return False
    return doc.get("nfs", False)


def _workload(doc, problems: list[str]) -> WorkloadSpec:
    if not isinstance(doc, dict):
        problems.append("workload: must be a mapping")
        return WorkloadSpec()
    kind = doc.get("kind", "tree")
    if kind not in WORKLOAD_KINDS:
        problems.append(f"workload.kind: '{kind}' is not one of {', '.join(WORKLOAD_KINDS)}")
        return WorkloadSpec()
    allowed = ("kind", "seed", *WORKLOAD_FIELDS[kind])
    for key in doc:
        if key not in allowed:
            problems.append(f"workload.{key}: not a field of workload kind '{kind}' ({', '.join(allowed)})")
    spec = WorkloadSpec(kind=kind)
    seed = doc.get("seed", spec.seed)
    if not _is_int(seed):
        problems.append(f"workload.seed: {seed!r} must be an integer")
    scale = doc.get("scale", spec.scale)
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or scale <= 0:
        problems.append(f"workload.scale: {scale!r} must be a number above 0")
    size, count = doc.get("bytes", spec.bytes), doc.get("count", spec.count)
    if not _is_int(size) or size < 1:
        problems.append(f"workload.bytes: {size!r} must be an integer of at least 1")
    if not _is_int(count) or count < 1:
        problems.append(f"workload.count: {count!r} must be an integer of at least 1")
    try:
        return WorkloadSpec(kind=kind, seed=int(seed), scale=float(scale), bytes=int(size), count=int(count))
    except (TypeError, ValueError):
        return spec


def _server(i: int, entry, problems: list[str]) -> ServerSpec | None:
    where = f"servers[{i}]"
    if not isinstance(entry, dict):
        problems.append(f"{where}: must be a mapping")
        return None
    before = len(problems)
    name, kind, listen = entry.get("name", f"web{i + 1}"), entry.get("kind", "nginx"), entry.get("listen")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_." for c in name):
        problems.append(f"{where}.name: {name!r} must be letters, digits, '-', '_' or '.'")
    if kind not in KINDS:
        problems.append(f"{where}.kind: '{kind}' is not one of {', '.join(KINDS)}")
        return None
    allowed = (*COMMON_FIELDS, *KIND_FIELDS[kind])
    for key in entry:
        if key not in allowed:
            problems.append(f"{where}.{key}: not a field of kind '{kind}' ({', '.join(allowed)})")
    host, port = _split_listen(str(listen or ""))
    if not listen or port is None:
        problems.append(f"{where}.listen: {listen!r} must be HOST:PORT")
    else:
        try:
            check_loopback(host)
        except ValueError as exc:
            problems.append(f"{where}.listen: {exc}")
    if kind in BALANCERS and "backends" not in entry:
        problems.append(f"{where}.backends: a {kind} needs the names of the servers it balances over")
    fields = {k: entry[k] for k in KIND_FIELDS[kind] if k in entry}
    _check_fields(where, fields, problems)
    if len(problems) > before:
        return None
    if fields.get("categories", DEFAULT_CATEGORIES) > fields.get("items", DEFAULT_ITEMS):
        problems.append(f"{where}.categories: must not be more than items (every category has an item)")
        return None
    if "backends" in fields:
        fields["backends"] = tuple(fields["backends"])
    return ServerSpec(name, kind, host, port, **fields)


def _check_fields(where: str, fields: dict, problems: list[str]) -> None:
    checks = {
        "workers": (lambda v: _is_int(v) and 1 <= v <= MAX_WORKERS, f"an integer from 1 to {MAX_WORKERS}"),
        "mpm": (lambda v: v in MPMS, f"one of {', '.join(MPMS)}"),
        "front": (lambda v: v in FRONTS, f"one of {', '.join(FRONTS)}"),
        "cost": (lambda v: _is_int(v) and 0 <= v <= MAX_COST, f"an integer from 0 to {MAX_COST}"),
        "backends": (lambda v: isinstance(v, list) and v and all(isinstance(b, str) for b in v)
                     and len(set(v)) == len(v), "a list of distinct server names"),
        "cache": (lambda v: isinstance(v, bool), "true or false"),
        "tls": (lambda v: isinstance(v, bool), "true or false"),
        "database": (lambda v: isinstance(v, str) and v, "the name of a mariadb server of this spec"),
        "seed": (_is_int, "an integer"),
        "items": (lambda v: _is_int(v) and 1 <= v <= MAX_ROWS, f"an integer from 1 to {MAX_ROWS}"),
        "categories": (lambda v: _is_int(v) and 1 <= v <= MAX_ROWS, f"an integer from 1 to {MAX_ROWS}"),
    }
    for key, value in fields.items():
        valid, expected = checks[key]
        if not valid(value):
            problems.append(f"{where}.{key}: {value!r} must be {expected}")


def _backend_problems(servers: list[ServerSpec], entries: list) -> list[str]:
    problems, seen = [], set()
    index = {}
    for i, entry in enumerate(entries):
        name = entry.get("name", f"web{i + 1}") if isinstance(entry, dict) else None
        if isinstance(name, str):
            if name in seen:
                problems.append(f"servers[{i}].name: '{name}' is used twice")
            seen.add(name)
            index.setdefault(name, i)
    by_name = {s.name: s for s in servers}
    for server in servers:
        for backend in server.backends:
            if backend == server.name:
                problems.append(f"servers[{index[server.name]}].backends: '{backend}' is the server itself")
            elif backend not in seen:
                problems.append(f"servers[{index[server.name]}].backends: '{backend}' is not a server of this spec")
            elif backend in by_name and by_name[backend].tls:
                # HAProxy and Varnish here forward plain HTTP.
                problems.append(f"servers[{index[server.name]}].backends: '{backend}' serves https (tls: true); "
                                f"a {server.kind} forwards plain http")
            elif backend in by_name and by_name[backend].kind not in HTTP_KINDS:
                problems.append(f"servers[{index[server.name]}].backends: '{backend}' is a "
                                f"{by_name[backend].kind} server, not an HTTP server")
        if server.database and by_name.get(server.database, server).kind != "mariadb":
            problems.append(f"servers[{index[server.name]}].database: '{server.database}' is not a mariadb "
                            "server of this spec")
    if not problems and len(_start_order(servers)) < len(servers):
        cyclic = sorted(s.name for s in servers if s not in _start_order(servers))
        problems.append(f"servers: backends form a cycle among {', '.join(cyclic)}")
    return problems


def _listen_problems(servers: list[ServerSpec]) -> list[str]:
    problems, taken = [], {}
    for server in servers:
        if server.port and (server.host, server.port) in taken:
            problems.append(f"servers: '{server.name}' and '{taken[server.host, server.port]}' both listen on "
                            f"{server.host}:{server.port}")
        taken.setdefault((server.host, server.port), server.name)
    return problems


def _start_order(servers: list[ServerSpec]) -> list[ServerSpec]:
    """Backends before the balancers in front of them, a database before its php servers (spec
    order otherwise); servers on a cycle are left out, which the caller reports."""
    ordered, placed = [], set()
    progress = True
    while progress:
        progress = False
        for server in servers:
            if server.name not in placed and all(b in placed for b in server.needs):
                ordered.append(server)
                placed.add(server.name)
                progress = True
    return ordered


def _split_listen(listen: str) -> tuple[str, int | None]:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    return host, int(port) if port.isdigit() and int(port) < 65536 else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
