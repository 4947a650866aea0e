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
      - {name: shopdb, kind: mariadb, listen: "127.0.0.11:0"}
      - {name: login, kind: journey, database: shopdb, users: 1000, workers: 4, listen: "127.0.0.12:0"}

Load balancers (haproxy, varnish) name their backends, a php server its database, a journey
server (journeyapp.py: the login, account and cart pages of issue 30's journeys) the mariadb
server it keeps its accounts and cart in (one journey server per mariadb; loopback only);
`LabSpec.servers` comes in start order, every server after the ones it needs.

A lab may instead place its servers on hosts of their own, network namespaces on one bridge
(`hosts:`, with `network:` and `agents:`; hostspec.py parses those sections):

    hosts:
      web1: {servers: [{kind: nginx}], cpus: [0]}     # listens on web1's address, port 80
      ctrl: {controller: true}
    agents: {count: 2}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from .apache import DEFAULT_MPM, MPMS
from .caps import machine_cpus
from .daemon import check_loopback
from .haproxy import FRONTS as HAPROXY_FRONTS
from .haproxy import MODES as HAPROXY_MODES
from .journeyapp import DEFAULT_USERS, MAX_USERS
from .mariadb import DEFAULT_CATEGORIES, DEFAULT_ITEMS, DEFAULT_SEED, MAX_ROWS
from .php import DEFAULT_COST, DEFAULT_FRONT, DEFAULT_MAX_AGE_S, FRONTS, MAX_COST, MAX_MAX_AGE_S
from .profiles import DEFAULT_PROFILE, PROFILES
from .varnish import DEFAULT_CACHE
from .workload import WORKLOAD_KINDS, WorkloadSpec

KINDS = ("nginx", "apache", "php", "haproxy", "varnish", "mariadb", "tomcat", "yaws", "journey")
BALANCERS = ("haproxy", "varnish")
HTTP_KINDS = ("nginx", "apache", "php", "haproxy", "varnish", "tomcat", "yaws", "journey")
# Kinds that need a mariadb server of the spec (php may have one).
DATABASE_KINDS = ("journey",)
COMMON_FIELDS = ("name", "kind", "listen", "cpus", "cpu_pct")
# A field's test of its value, and what the value must be (for the problem's message).
Check = tuple[Callable[[Any], object], str]
# A server on a lab host: its address is the host's, its caps the host's.
PLACED_FIELDS = ("name", "kind", "port")
# Fields each server kind takes besides the common ones.
KIND_FIELDS = {
    "nginx": ("workers", "tls", "mtls", "profile"),
    "apache": ("mpm", "profile", "also_listen"),
    "php": ("front", "mpm", "workers", "cost", "database", "max_age_s", "profile"),
    "haproxy": ("backends", "front", "mode"),
    "varnish": ("backends", "cache"),
    "mariadb": ("seed", "items", "categories"),
    "tomcat": (),
    "yaws": ("also_listen",),
    "journey": ("database", "workers", "users"),
}
WORKLOAD_FIELDS = {"tree": ("scale",), "single": ("bytes",), "files30k": ("count",), "files100k": ("count",)}
MAX_WORKERS = 256
# How servers read an NFS docroot (docroot.cache): `warm` keeps files cached and open (nginx's
# open_file_cache), so NFS is out of the request path after the first request; `close-to-open`
# revalidates every open with the server and keeps pages while the file is unchanged, as a
# kernel NFS client does; `none` sends every stat, open and read to the server.
NFS_CACHES = ("warm", "close-to-open", "none")
DEFAULT_NFS_CACHE = "warm"
# Ports of servers on lab hosts, when the spec gives none.
DEFAULT_PORT, DEFAULT_TLS_PORT, DEFAULT_PORTS = 80, 443, {"mariadb": 3306}


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
    workers: int | None = None  # nginx worker processes, PHP-FPM children
    tls: bool = False  # nginx: https with a self-signed certificate
    mtls: bool = False  # nginx: https asking for a client certificate of the lab's own CA (pki.py)
    mpm: str = DEFAULT_MPM  # apache, php with front apache
    front: str = DEFAULT_FRONT  # php: nginx or apache; haproxy: http1, h2 or h2c (HAPROXY_FRONTS)
    mode: str = "http"  # haproxy: http (balances each request, each h2 stream) or tcp (each connection)
    cost: int = DEFAULT_COST  # php: SHA-256 rounds per page by default
    backends: tuple[str, ...] = ()  # haproxy, varnish: names of other servers
    cache: bool = DEFAULT_CACHE  # varnish
    database: str | None = None  # php, journey: name of a mariadb server (php: the database pages)
    users: int = DEFAULT_USERS  # journey: accounts user0..user<users-1>, seeded at start
    seed: int = DEFAULT_SEED  # mariadb: same seed, same rows
    items: int = DEFAULT_ITEMS  # mariadb: rows of `items`
    categories: int = DEFAULT_CATEGORIES  # mariadb: rows of `categories`
    profile: str = DEFAULT_PROFILE  # nginx, apache, php's front: lab or stock (profiles.py)
    max_age_s: int = DEFAULT_MAX_AGE_S  # php: 0 no-store; N: the page may be cached N s
    cpus: tuple[int, ...] = ()  # loopback servers: CPUs it may run on (caps.py)
    cpu_pct: int | None = None  # loopback servers: CPU quota, % of one CPU
    on: str | None = None  # the lab host it runs on (hosts:); host is then its address
    # apache, yaws: more loopback addresses it listens on, at its port: each is a destination of
    # its own for a client's ephemeral ports (about 28,000 per destination), so that one client
    # can hold more connections to the server than one address allows (study 003)
    also_listen: tuple[str, ...] = ()

    @property
    def needs(self) -> tuple[str, ...]:
        """Servers that must be up before this one."""
        return self.backends + ((self.database,) if self.database else ())


@dataclass(frozen=True)
class HostSpec:
    """A lab host: a network namespace with its own address on the lab bridge."""

    name: str
    controller_port: int | None = None  # the lab's controller listens here (TLS, lab PKI)
    nfs: bool = False  # the docroot's NFS server (nfs-ganesha) runs here
    agent: bool = False  # a load agent runs here (from the agents section)
    cores: int = 1  # the agent's engine processes
    cpus: tuple[int, ...] = ()  # every process of the host runs on these CPUs
    cpu_pct: int | None = None  # ... and shares this quota (% of one CPU)
    link_mbit: int | None = None  # both directions of its link shaped to this rate

    @property
    def capped(self) -> bool:
        return bool(self.cpus or self.cpu_pct or self.link_mbit)


@dataclass(frozen=True)
class LabSpec:
    workload: WorkloadSpec
    servers: tuple[ServerSpec, ...]
    # True: the workload is exported by nfs-ganesha and the servers read it through an NFS
    # mount (FUSE here; a kernel mount on real hosts), as in the classic cluster studies.
    nfs: bool = False
    nfs_cache: str = DEFAULT_NFS_CACHE
    # Loopback labs: the CPUs the NFS path (ganesha and the FUSE mount) runs on, so that its work
    # stays beside the servers it feeds and off the generator's CPUs (empty: any CPU).
    nfs_cpus: tuple[int, ...] = ()
    hosts: tuple[HostSpec, ...] = ()  # empty: every server on loopback
    subnet: str | None = None  # the hosts' network; None: a free /24 at `up`
    controller: str | None = None  # agents dial this ADDRESS:PORT (a controller the lab does not start)

    # The tree's fields, as earlier versions of the spec had them.
    @property
    def scale(self) -> float:
        return self.workload.scale

    @property
    def seed(self) -> int:
        return self.workload.seed


def load_spec(path: Path) -> LabSpec:
    return parse_spec(read_spec_doc(path))


def read_spec_doc(path: Path) -> object:
    """A spec file's YAML document; a file that cannot be read or is not YAML is a SpecError."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise SpecError([f"cannot read {path}: {exc.strerror}"]) from exc
    except yaml.YAMLError as exc:
        raise SpecError([f"{path} is not valid YAML: {exc}"]) from exc
    return doc


def parse_spec(doc: object) -> LabSpec:
    if not isinstance(doc, dict):
        raise SpecError(["a lab spec must be a mapping"])
    from .hostspec import parse_hosts  # the hosts sections build on this module's server parsing

    problems = [f"{key}: not a field of a lab spec ({', '.join(TOP_FIELDS)})" for key in doc if key not in TOP_FIELDS]
    nfs, nfs_cache, nfs_cpus = _docroot(doc.get("docroot", {}), problems)
    workload = _workload(doc.get("workload") or {}, problems)
    if "hosts" in doc:
        lab = parse_hosts(doc, nfs, problems)
        placed = lab.placed
    else:
        lab = None
        placed = _loopback_servers(doc, problems)
    servers = [s for p in placed if (s := _server(p, problems))]
    problems += _name_problems(placed) + _backend_problems(servers, placed) + _listen_problems(servers)
    nfs = nfs or bool(lab and any(h.nfs for h in lab.hosts))
    if isinstance(docroot := doc.get("docroot"), dict) and "cache" in docroot and not nfs:
        problems.append("docroot.cache: only for an NFS docroot (docroot.nfs, or a host with nfs: true)")
    if nfs_cpus and (lab is not None or not nfs):
        problems.append("docroot.cpus: only for an NFS docroot on loopback (a lab host's caps place its NFS server)")
    if problems:
        raise SpecError(problems)
    if lab is None:
        return LabSpec(workload, tuple(_start_order(servers)), nfs=nfs, nfs_cache=nfs_cache, nfs_cpus=nfs_cpus)
    return LabSpec(
        workload,
        tuple(_start_order(servers)),
        nfs=nfs,
        nfs_cache=nfs_cache,
        hosts=lab.hosts,
        subnet=lab.subnet,
        controller=lab.controller,
    )


TOP_FIELDS = ("workload", "servers", "docroot", "network", "hosts", "agents")


def _loopback_servers(doc: dict[str, Any], problems: list[str]) -> list[Placed]:
    """The `servers` of a lab without hosts, every one on loopback."""
    for key in ("network", "agents"):
        if key in doc:
            problems.append(f"{key}: only a lab with hosts has a {key} section")
    entries = doc.get("servers")
    if not isinstance(entries, list) or not entries:
        problems.append("servers: give a list of at least one server")
        entries = []
    return [Placed(f"servers[{i}]", entry, f"web{i + 1}") for i, entry in enumerate(entries)]


@dataclass(frozen=True)
class Placed:
    """A server entry and where it sits in the spec: `where` names it in problems, `default_name`
    applies without a `name`, `on` is its lab host (None: loopback)."""

    where: str
    entry: object
    default_name: str
    on: str | None = None

    @property
    def name(self) -> object:
        if isinstance(self.entry, str):  # a kind alone
            return self.default_name
        return self.entry.get("name", self.default_name) if isinstance(self.entry, dict) else None


def _docroot(doc: object, problems: list[str]) -> tuple[bool, str, tuple[int, ...]]:
    fields = {"nfs", "cache", "cpus"}
    if not isinstance(doc, dict) or set(doc) - fields or not isinstance(doc.get("nfs", False), bool):
        problems.append("docroot: must be {nfs: true|false, cache: " + "|".join(NFS_CACHES) + ", cpus: [CPU, ...]}")
        return False, DEFAULT_NFS_CACHE, ()
    cache = doc.get("cache", DEFAULT_NFS_CACHE)
    if cache not in NFS_CACHES:
        problems.append(f"docroot.cache: {cache!r} must be one of {', '.join(NFS_CACHES)}")
    cpus = doc.get("cpus", [])
    check, wanted = CAP_CHECKS["cpus"]
    if "cpus" in doc and not check(cpus):
        problems.append(f"docroot.cpus: {cpus!r} must be {wanted}")
        cpus = []
    return doc.get("nfs", False), cache, tuple(cpus)


def _workload(doc: object, problems: list[str]) -> WorkloadSpec:
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


def _server(placed: Placed, problems: list[str]) -> ServerSpec | None:
    where, entry = placed.where, placed.entry
    if isinstance(entry, str):  # a host's `servers: [nginx]`: a kind alone
        entry = {"kind": entry}
    if not isinstance(entry, dict):
        problems.append(f"{where}: must be a mapping")
        return None
    before = len(problems)
    name, kind = entry.get("name", placed.default_name), entry.get("kind", "nginx")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_." for c in name):
        problems.append(f"{where}.name: {name!r} must be letters, digits, '-', '_' or '.'")
    if kind not in KINDS:
        problems.append(f"{where}.kind: '{kind}' is not one of {', '.join(KINDS)}")
        return None
    problems += _unknown_server_fields(placed, entry, kind)
    host, port = _address(placed, entry, kind, problems)
    if kind in BALANCERS and "backends" not in entry:
        problems.append(f"{where}.backends: a {kind} needs the names of the servers it balances over")
    problems += _database_kind_problems(placed, entry, kind)
    fields = _kind_fields(kind, entry)
    _check_fields(where, kind, fields, problems)
    if len(problems) > before:
        return None
    if (problem := _combination_problem(where, kind, fields, port, placed.on)) is not None:
        problems.append(problem)
        return None
    for key in ("backends", "cpus", "also_listen"):
        if key in fields:
            fields[key] = tuple(fields[key])
    return ServerSpec(name, kind, host, port, on=placed.on, **fields)


def _kind_fields(kind: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's fields of its kind, with the defaults that differ by kind."""
    fields = {k: entry[k] for k in (*KIND_FIELDS[kind], "cpus", "cpu_pct") if k in entry}
    if kind == "haproxy":  # its front is what it speaks to clients, not a php server's web server
        fields.setdefault("front", HAPROXY_FRONTS[0])
    return fields


def _database_kind_problems(placed: Placed, entry: dict[str, Any], kind: str) -> list[str]:
    """A journey server names its mariadb server and runs on loopback."""
    problems = []
    if kind in DATABASE_KINDS and "database" not in entry:
        problems.append(f"{placed.where}.database: a {kind} server needs the name of the spec's mariadb server")
    if kind == "journey" and placed.on:
        problems.append(f"{placed.where}.kind: a journey server runs on loopback only (under servers:, not a host)")
    return problems


def _unknown_server_fields(placed: Placed, entry: dict[str, Any], kind: str) -> list[str]:
    allowed = (*(PLACED_FIELDS if placed.on else COMMON_FIELDS), *KIND_FIELDS[kind])
    problems = []
    for key in entry:
        if key not in allowed:
            hint = (
                f"; on a lab host the address and caps are the host's (hosts.{placed.on})"
                if placed.on and key in COMMON_FIELDS
                else ""
            )
            problems.append(f"{placed.where}.{key}: not a field of kind '{kind}' ({', '.join(allowed)}){hint}")
    return problems


def _combination_problem(where: str, kind: str, fields: dict[str, Any], port: int, placed_on: str | None) -> str | None:
    """A problem of fields that are each valid but not together."""
    if fields.get("also_listen") and (placed_on or port == 0):
        return f"{where}.also_listen: only for a loopback server with a fixed port (listen: HOST:PORT, PORT not 0)"
    if fields.get("categories", DEFAULT_CATEGORIES) > fields.get("items", DEFAULT_ITEMS):
        return f"{where}.categories: must not be more than items (every category has an item)"
    if kind == "haproxy" and fields.get("mode") == "tcp" and fields["front"] != HAPROXY_FRONTS[0]:
        return f"{where}.front: a mode tcp haproxy passes bytes through (the backends speak TLS or h2): leave front out"
    if kind == "php" and "mpm" in fields and fields.get("front", DEFAULT_FRONT) != "apache":
        return f"{where}.mpm: only for front: apache (an nginx front has no MPM)"
    if fields.get("profile") == "stock" and "workers" in fields and kind in ("nginx", "php"):
        return f"{where}.workers: a stock {kind} has Debian's " + (
            "worker_processes auto" if kind == "nginx" else "PHP-FPM pool (pm = dynamic, at most 5)"
        )
    return None


def _address(placed: Placed, entry: dict[str, Any], kind: str, problems: list[str]) -> tuple[str, int]:
    """Loopback servers: HOST:PORT from `listen`. Servers on a lab host: the port (a default per
    kind); the address is the host's, known once the network is up."""
    where = placed.where
    if placed.on:
        default = DEFAULT_PORTS.get(
            kind, DEFAULT_TLS_PORT if True in (entry.get("tls"), entry.get("mtls")) else DEFAULT_PORT
        )
        port = entry.get("port", default)
        if not _is_int(port) or not 1 <= port <= 65535:
            problems.append(f"{where}.port: {port!r} must be a port from 1 to 65535")
            return "", 0
        return "", port
    listen = entry.get("listen")
    host, port = _split_listen(str(listen or ""))
    if not listen or port is None:
        problems.append(f"{where}.listen: {listen!r} must be HOST:PORT")
        return "", 0
    try:
        check_loopback(host)
    except ValueError as exc:
        problems.append(f"{where}.listen: {exc}")
    return host, port


def _check_fields(where: str, kind: str, fields: dict[str, Any], problems: list[str]) -> None:
    fronts = HAPROXY_FRONTS if kind == "haproxy" else FRONTS
    checks: dict[str, Check] = {
        "workers": (lambda v: _is_int(v) and 1 <= v <= MAX_WORKERS, f"an integer from 1 to {MAX_WORKERS}"),
        "mpm": (lambda v: v in MPMS, f"one of {', '.join(MPMS)}"),
        "front": (lambda v: v in fronts, f"one of {', '.join(fronts)}"),
        "mode": (lambda v: v in HAPROXY_MODES, f"one of {', '.join(HAPROXY_MODES)}"),
        "cost": (lambda v: _is_int(v) and 0 <= v <= MAX_COST, f"an integer from 0 to {MAX_COST}"),
        "backends": (
            lambda v: isinstance(v, list) and v and all(isinstance(b, str) for b in v) and len(set(v)) == len(v),
            "a list of distinct server names",
        ),
        "cache": (lambda v: isinstance(v, bool), "true or false"),
        "also_listen": (_is_loopback_list, "a list of distinct loopback addresses (no port: the server's)"),
        "tls": (lambda v: isinstance(v, bool), "true or false"),
        "mtls": (lambda v: isinstance(v, bool), "true or false"),
        "database": (lambda v: isinstance(v, str) and v, "the name of a mariadb server of this spec"),
        "seed": (_is_int, "an integer"),
        "items": (lambda v: _is_int(v) and 1 <= v <= MAX_ROWS, f"an integer from 1 to {MAX_ROWS}"),
        "categories": (lambda v: _is_int(v) and 1 <= v <= MAX_ROWS, f"an integer from 1 to {MAX_ROWS}"),
        "profile": (lambda v: v in PROFILES, f"one of {', '.join(PROFILES)}"),
        "max_age_s": (lambda v: _is_int(v) and 0 <= v <= MAX_MAX_AGE_S, f"an integer from 0 to {MAX_MAX_AGE_S}"),
        "users": (lambda v: _is_int(v) and 1 <= v <= MAX_USERS, f"an integer from 1 to {MAX_USERS}"),
        **CAP_CHECKS,
    }
    for key, value in fields.items():
        valid, expected = checks[key]
        if not valid(value):
            problems.append(f"{where}.{key}: {value!r} must be {expected}")


def _name_problems(placed: list[Placed]) -> list[str]:
    problems, seen = [], set()
    for p in placed:
        if isinstance(p.name, str):
            if p.name in seen:
                problems.append(f"{p.where}.name: '{p.name}' is used twice")
            seen.add(p.name)
    return problems


def _backend_problems(servers: list[ServerSpec], placed: list[Placed]) -> list[str]:
    problems: list[str] = []
    seen = {p.name for p in placed}
    where: dict[object, str] = {}
    for p in placed:
        where.setdefault(p.name, p.where)
    by_name = {s.name: s for s in servers}
    for server in servers:
        at = where[server.name]
        for backend in server.backends:
            if backend == server.name:
                problems.append(f"{at}.backends: '{backend}' is the server itself")
            elif backend not in seen:
                problems.append(f"{at}.backends: '{backend}' is not a server of this spec")
            elif backend in by_name and (by_name[backend].tls or by_name[backend].mtls):
                # HAProxy and Varnish here forward plain HTTP.
                problems.append(
                    f"{at}.backends: '{backend}' serves https (tls or mtls); a {server.kind} forwards plain http"
                )
            elif backend in by_name and by_name[backend].kind not in HTTP_KINDS:
                problems.append(f"{at}.backends: '{backend}' is a {by_name[backend].kind} server, not an HTTP server")
        if server.database and by_name.get(server.database, server).kind != "mariadb":
            problems.append(f"{at}.database: '{server.database}' is not a mariadb server of this spec")
    problems += _shared_database_problems(servers, where)
    if not problems and len(_start_order(servers)) < len(servers):
        cyclic = sorted(s.name for s in servers if s not in _start_order(servers))
        problems.append(f"servers: backends form a cycle among {', '.join(cyclic)}")
    return problems


def _shared_database_problems(servers: list[ServerSpec], where: dict[object, str]) -> list[str]:
    """One journey server per mariadb server: each keeps its accounts in its database `journey`."""
    problems = []
    journeys: dict[str | None, str] = {}  # mariadb server -> its journey server
    for server in servers:
        if server.kind == "journey" and journeys.setdefault(server.database, server.name) != server.name:
            other = journeys[server.database]
            problems.append(
                f"{where[server.name]}.database: '{server.database}' holds the journey server '{other}''s data already"
            )
    return problems


def _listen_problems(servers: list[ServerSpec]) -> list[str]:
    problems: list[str] = []
    taken: dict[tuple[str, int], str] = {}
    for server in servers:
        place = server.on or server.host  # on a lab host: the host's address, unknown until up
        for host in (place, *server.also_listen):
            if server.port and (host, server.port) in taken:
                problems.append(
                    f"servers: '{server.name}' and '{taken[host, server.port]}' both listen on {host}:{server.port}"
                )
            taken.setdefault((host, server.port), server.name)
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


def _is_loopback_list(value: Any) -> bool:
    if not isinstance(value, list) or not value or len(set(map(str, value))) != len(value):
        return False
    try:
        for host in value:
            check_loopback(str(host))
    except ValueError:
        return False
    return True


def _split_listen(listen: str) -> tuple[str, int | None]:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    return host, int(port) if port.isdigit() and int(port) < 65536 else None


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _valid_cpus(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(_is_int(c) for c in value)
        and len(set(value)) == len(value)
        and set(value) <= set(machine_cpus())
    )


# The caps of a loopback server or a lab host (caps.py); also used by hostspec.py.
CAP_CHECKS: dict[str, Check] = {
    "cpus": (_valid_cpus, f"a list of distinct CPUs of this machine ({', '.join(map(str, machine_cpus()))})"),
    "cpu_pct": (
        lambda v: _is_int(v) and 1 <= v <= 100 * len(machine_cpus()),
        f"an integer from 1 to {100 * len(machine_cpus())} (percent of one CPU)",
    ),
}
