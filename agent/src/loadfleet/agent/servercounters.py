"""Servers' own statistics: cumulative counters a monitor-only agent reads with every heartbeat.

Three servers keep counters of their own that say more than the host's CPU does: HAProxy
(`show stat` on its stats socket), Varnish (`varnishstat -j`) and nfs-ganesha (per-client I/O
over D-Bus, through `busctl`). Each reader returns {name: cumulative value}; the controller
turns two readings into a rate, so nothing here keeps state but ganesha's client list. The
exceptions are HAProxy's gauges (HAPROXY_GAUGES: its queues, sessions and session limits),
levels as read now, of which the controller takes means.

Counter names (docs/results.md#monitored-hosts):

    haproxy.<proxy>.<server>.<field>     haproxy.group.web1.req_tot, haproxy.lb.FRONTEND.bout
    haproxy.<proxy>.<server>.<gauge>     haproxy.group.BACKEND.qcur, haproxy.group.web1.scur, .slim
    varnish.<counter>                    varnish.client_req, varnish.cache_hit
    varnish.backend.<backend>.<field>    varnish.backend.b_web1.req (the VCL's backend name)
    ganesha.client.<address>.<field>     ganesha.client.127.0.0.1.read_bytes

A reading costs one socket exchange (HAProxy) or one subprocess (Varnish, ganesha once its
client list is known) with a short timeout, so it can run every second. Whatever goes wrong
is a `CounterError` naming the server; `CounterReader` turns it into one warning per failure
streak and no counters for that server, never a crash.

The lab (loadfleet.targets) reads its balancers and its NFS server through these functions
too, so `loadfleet-lab status` and a run count the same way.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import AgentError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1.0
# HAProxy `show stat` columns that only ever grow (the rest are gauges or states).
HAPROXY_FIELDS = (
    "req_tot",
    "stot",
    "bin",
    "bout",
    "hrsp_2xx",
    "hrsp_3xx",
    "hrsp_4xx",
    "hrsp_5xx",
    "econ",
    "eresp",
    "ereq",
    "cli_abrt",
    "srv_abrt",
)
# HAProxy `show stat` columns that are levels, sent beside the counters under the same kind of
# name (the controller's analysis/hosts.py GAUGE_FIELDS takes their means, not rates): requests
# queued now, sessions now, the session limit. They say whether a balancer is the bottleneck.
HAPROXY_GAUGES = ("qcur", "scur", "slim")
# Varnish MAIN counters worth a rate: requests, cache outcomes, backend traffic and trouble.
VARNISH_MAIN = (
    "client_req",
    "cache_hit",
    "cache_miss",
    "cache_hitpass",
    "cache_hitmiss",
    "s_pass",
    "s_pipe",
    "backend_req",
    "backend_conn",
    "backend_reuse",
    "backend_fail",
    "fetch_failed",
    "sess_conn",
    "sess_fail",
    "sess_dropped",
    "s_resp_hdrbytes",
    "s_resp_bodybytes",
    "n_lru_nuked",
    "threads_failed",
)
VARNISH_BACKEND = ("req", "fail", "busy", "beresp_bodybytes")
GANESHA = "org.ganesha.nfsd"
GANESHA_CLIENT_MGR = "/org/ganesha/nfsd/ClientMgr"
# ganesha's client list changes rarely (a new mount); asking for it every heartbeat would
# double the subprocesses.
GANESHA_CLIENTS_EVERY_S = 10.0


class CounterError(AgentError):
    """A server's counters could not be read (socket gone, server restarting, odd output)."""


class CounterSource(Protocol):
    """One server whose counters the agent reads; `name` is for log lines."""

    @property
    def name(self) -> str: ...  # read-only: frozen dataclasses are sources too

    def read(self) -> dict[str, float]:
        """{counter name: cumulative value}; raises CounterError."""


# --- HAProxy -----------------------------------------------------------------------------


def haproxy_show_stat(stats_socket: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """The `show stat` CSV from HAProxy's stats socket (its header line starts with '# ')."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout_s)
            s.connect(str(stats_socket))
            s.sendall(b"show stat\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
    except OSError as exc:
        raise CounterError(f"haproxy: cannot read stats from {stats_socket}: {exc}") from exc
    return b"".join(chunks).decode(errors="replace")


def haproxy_counters(stats_csv: str) -> dict[str, float]:
    """`haproxy.<proxy>.<server>.<field>` for every row (FRONTEND and BACKEND rows too): the
    counters of HAPROXY_FIELDS and the gauges of HAPROXY_GAUGES a row has a value for (a
    frontend has no queue, a server without maxconn no session limit)."""
    counters = {}
    for row in csv.DictReader(io.StringIO(stats_csv.removeprefix("# "))):
        proxy, server = row.get("pxname"), row.get("svname")
        if not proxy or not server:
            continue
        for name in (*HAPROXY_FIELDS, *HAPROXY_GAUGES):
            value = row.get(name)
            if name == "req_tot" and not value and server not in ("FRONTEND", "BACKEND"):
                value = row.get("lbtot")  # versions without per-server req_tot: times chosen
            if name == "slim" and server == "BACKEND":
                # A backend's slim is its `fullconn` (by default a tenth of its frontends'
                # maxconn), which only scales servers' minconn: no limit sessions stop at.
                continue
            if value:
                counters[f"haproxy.{proxy}.{server}.{name}"] = _number(value, "haproxy")
    if not counters:
        raise CounterError("haproxy: `show stat` returned no rows")
    return counters


@dataclass(frozen=True)
class HaproxyStats:
    stats_socket: Path
    timeout_s: float = DEFAULT_TIMEOUT_S
    name: str = "haproxy"

    def read(self) -> dict[str, float]:
        return haproxy_counters(haproxy_show_stat(self.stats_socket, self.timeout_s))


# --- Varnish -----------------------------------------------------------------------------


def varnishstat(workdir: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """`varnishstat -1 -j -n WORKDIR`: {counter: {"value": ..., "flag": ...}} (the document's
    "counters", where varnishstat 6.5+ nests them)."""
    # -t 0: a varnishd that is not there is an error now, not after varnishstat's 5 s of waiting.
    argv = [_program("varnishstat", ("/usr/bin",)), "-1", "-j", "-t", "0", "-n", str(workdir)]
    out = _run(argv, "varnish", timeout_s)
    try:
        doc = json.loads(out)
    except ValueError as exc:
        raise CounterError(f"varnish: varnishstat wrote no JSON: {out[:200]!r}") from exc
    counters = doc.get("counters", doc) if isinstance(doc, dict) else None
    if not isinstance(counters, dict):
        raise CounterError("varnish: varnishstat's JSON holds no counters")
    return counters


def varnish_counters(stats: dict[str, Any]) -> dict[str, float]:
    """`varnish.<counter>` for VARNISH_MAIN and `varnish.backend.<backend>.<field>` for every
    backend, summed over the VCLs that name it (after a reload, old VCLs keep their counts)."""
    counters = {}
    for key, entry in stats.items():
        # flag "c": a counter; "g" (gauge) and "b" (bitmap) make no rate.
        if not isinstance(entry, dict) or "value" not in entry or entry.get("flag", "c") != "c":
            continue
        section, _, rest = key.partition(".")
        if section == "MAIN" and rest in VARNISH_MAIN:
            counters[f"varnish.{rest}"] = _number(entry["value"], "varnish")
        elif section == "VBE":
            _vcl, _, backend_field = rest.partition(".")
            backend, _, name = backend_field.rpartition(".")
            if backend and name in VARNISH_BACKEND:
                counter = f"varnish.backend.{backend}.{name}"
                counters[counter] = counters.get(counter, 0.0) + _number(entry["value"], "varnish")
    if "varnish.client_req" not in counters:
        raise CounterError("varnish: varnishstat shows no MAIN.client_req")
    return counters


@dataclass(frozen=True)
class VarnishStats:
    workdir: Path
    timeout_s: float = DEFAULT_TIMEOUT_S
    name: str = "varnish"

    def read(self) -> dict[str, float]:
        return varnish_counters(varnishstat(self.workdir, self.timeout_s))


# --- nfs-ganesha -------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientIO:
    """One NFS client's NFSv4.0 I/O as ganesha counted it (cumulative)."""

    client: str  # as ganesha names it, e.g. ::ffff:127.0.0.1
    read_ops: int
    read_bytes: int  # bytes transferred by READs
    write_ops: int
    write_bytes: int
    errors: int  # failed READs and WRITEs


def ganesha_client_list(address: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """The clients ganesha knows (`ShowClients`), by address."""
    reply = _busctl(address, "org.ganesha.nfsd.clientmgr", "ShowClients", timeout_s=timeout_s)
    try:
        return [entry[0] for entry in reply[1]]
    except (IndexError, TypeError) as exc:
        raise CounterError(f"ganesha: odd ShowClients reply: {str(reply)[:200]}") from exc


def ganesha_client_io(address: str, client: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> ClientIO:
    """One client's NFSv4.0 reads and writes (`GetNFSv40IO`)."""
    reply = _busctl(address, "org.ganesha.nfsd.clientstats", "GetNFSv40IO", "s", client, timeout_s=timeout_s)
    # (ok, message, time, read, write), each of read and write (bytes requested, bytes
    # transferred, ops, errors, latency, queue wait); not ok: no NFSv4.0 I/O yet.
    try:
        read, write = (reply[3], reply[4]) if reply[0] else ([0] * 6, [0] * 6)
        return ClientIO(
            client,
            read_ops=int(read[2]),
            read_bytes=int(read[1]),
            write_ops=int(write[2]),
            write_bytes=int(write[1]),
            errors=int(read[3]) + int(write[3]),
        )
    except (IndexError, TypeError, ValueError) as exc:
        raise CounterError(f"ganesha: odd GetNFSv40IO reply for {client}: {str(reply)[:200]}") from exc


def ganesha_clients(address: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, ClientIO]:
    """{client address: its I/O} from the ganesha on the D-Bus at `address`."""
    return {c: ganesha_client_io(address, c, timeout_s) for c in ganesha_client_list(address, timeout_s)}


def ganesha_counters(clients: dict[str, ClientIO]) -> dict[str, float]:
    """`ganesha.client.<address>.<field>`; an IPv4 client keeps its plain address (ganesha
    names it ::ffff:127.0.0.1)."""
    counters = {}
    for io_ in clients.values():
        prefix = f"ganesha.client.{io_.client.removeprefix('::ffff:')}"
        for name in ("read_ops", "read_bytes", "write_ops", "write_bytes", "errors"):
            counters[f"{prefix}.{name}"] = float(getattr(io_, name))
    return counters


@dataclass
class GaneshaStats:
    """ganesha's per-client counters; the client list is asked for again every
    GANESHA_CLIENTS_EVERY_S, or at once while there is none or a client vanished."""

    address: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    name: str = "ganesha"
    _clients: list[str] = field(default_factory=list)
    _listed_at: float = float("-inf")

    def read(self) -> dict[str, float]:
        now = time.monotonic()
        if not self._clients or now - self._listed_at >= GANESHA_CLIENTS_EVERY_S:
            self._clients, self._listed_at = ganesha_client_list(self.address, self.timeout_s), now
        try:
            return ganesha_counters({c: ganesha_client_io(self.address, c, self.timeout_s) for c in self._clients})
        except CounterError:
            self._clients = []  # maybe a client expired: list them afresh next time
            raise


# --- reading them all ----------------------------------------------------------------------


@dataclass
class CounterReader:
    """Reads every source; a source that fails gives no counters for that reading and one
    warning when it starts failing (and a note when it recovers), not one per heartbeat."""

    sources: tuple[CounterSource, ...] = ()
    _failing: set[str] = field(default_factory=set)

    def read(self) -> dict[str, float]:
        counters: dict[str, float] = {}
        for source in self.sources:
            try:
                counters.update(source.read())
            except CounterError as exc:
                if source.name not in self._failing:
                    self._failing.add(source.name)
                    log.warning("%s (its counters are left out until it answers again)", exc)
                continue
            if source.name in self._failing:
                self._failing.discard(source.name)
                log.info("%s counters readable again", source.name)
        return counters


def counter_sources(
    *,
    haproxy: Sequence[str] = (),
    varnish: Sequence[str] = (),
    ganesha: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> tuple[CounterSource, ...]:
    """Sources from the command line: stats sockets, varnishstat -n directories, D-Bus addresses
    (a plain path stands for unix:path=PATH)."""
    return (
        *(HaproxyStats(Path(p), timeout_s, name=f"haproxy {p}") for p in haproxy),
        *(VarnishStats(Path(p), timeout_s, name=f"varnish {p}") for p in varnish),
        *(GaneshaStats(a if "=" in a else f"unix:path={a}", timeout_s, name=f"ganesha {a}") for a in ganesha),
    )


# --- helpers ---------------------------------------------------------------------------------


def _busctl(address: str, interface: str, method: str, *args: str, timeout_s: float) -> list[Any]:
    argv = [
        _program("busctl", ("/usr/bin", "/bin")),
        f"--address={address}",
        "--json=short",
        f"--timeout={max(1, round(timeout_s))}",
        "call",
        GANESHA,
        GANESHA_CLIENT_MGR,
        interface,
        method,
        *args,
    ]
    out = _run(argv, f"ganesha {method}", timeout_s + 1)
    try:
        data: list[Any] = json.loads(out)["data"]  # busctl's JSON: the method's out arguments
    except (ValueError, KeyError, TypeError) as exc:
        raise CounterError(f"ganesha {method}: odd reply: {out[:200]!r}") from exc
    return data


def _run(argv: list[str], server: str, timeout_s: float) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise CounterError(f"{server}: {Path(argv[0]).name} did not answer within {timeout_s:g} s") from exc
    except OSError as exc:
        raise CounterError(f"{server}: cannot run {argv[0]}: {exc}") from exc
    if result.returncode != 0:
        raise CounterError(f"{server}: {Path(argv[0]).name} failed: {result.stderr.strip()[-300:]}")
    return result.stdout


def _program(name: str, extra_dirs: tuple[str, ...]) -> str:
    found = shutil.which(name) or next((str(Path(d) / name) for d in extra_dirs if (Path(d) / name).exists()), None)
    if not found:
        raise CounterError(f"{name} is not installed")
    return found


def _number(value: Any, server: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise CounterError(f"{server}: a counter is not a number: {value!r}") from exc
