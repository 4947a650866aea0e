"""Several hosts on one machine: network namespaces on one bridge, for tests that need
separate addresses (controller, agents, servers), partitions and a clean teardown.

    with LabNetwork() as net:                      # or LabNetwork("10.231.7.0/24")
        web = net.add_host("web1")                 # Host(name, address, netns)
        proc = web.spawn(["nginx", ...])           # nsenter --net=/var/run/netns/<ns> nginx ...
        net.cut(web); net.restore(web)             # its bridge port down / up: a partition

Safety. Load may only go to loopback or to these namespaces. Before anything else the network
adds the guard route `unreachable <subnet>` to the root namespace: without it, a packet from the
root namespace to a lab address would follow the default route out of the machine. The subnet
must be private and overlap no address or route of the root namespace; the guard goes last at
teardown, after every process in the namespaces is stopped (by PID) and the namespaces deleted.

Processes start with `nsenter --net=...` rather than `ip netns exec`: the latter gives them a
private copy of the mount table, so FUSE mounts made later would be invisible to them.

Namespaces are named `<prefix>-<creator pid>-<n>-<host>` (the bridge is host `sw`) and each network
records itself in `/run/loadfleet-netns/`, so `cleanup_stale(prefix)` can remove what a crashed
test run (a creator that is no longer alive) left behind, and only that.

Errors: `LabError` (from `daemon`), with the failing `ip` command and its message.
"""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import itertools
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .daemon import LabError, find_program, pid_alive, spawn, stop_pid

NETNS_DIR = Path("/var/run/netns")
STATE_DIR = Path("/run/loadfleet-netns")
DEFAULT_PREFIX = "lf"
BRIDGE_NS = "sw"
BRIDGE = "br0"
START_TIMEOUT_S = 10.0
AUTO_SUBNETS = "10.231.0.0/16"  # where LabNetwork() picks a free /24
_SEQUENCE = itertools.count(1)
_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")  # short: it goes into namespace names


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `ip ARGS`; raises LabError with its message on failure (when `check`)."""
    return _iproute2("ip", args, check)


def tc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `tc ARGS` (traffic control); raises LabError on failure (when `check`)."""
    return _iproute2("tc", args, check)


def _iproute2(program: str, args: tuple[str, ...], check: bool) -> subprocess.CompletedProcess:
    result = subprocess.run([find_program(program, "iproute2"), *args], capture_output=True, text=True, timeout=10)
    if check and result.returncode != 0:
        raise LabError(f"{program} {' '.join(args)}: {result.stderr.strip() or f'exit {result.returncode}'}")
    return result


@dataclass(frozen=True)
class Host:
    """A host of a lab network: its own network namespace with `address` on the lab bridge.

    Also a launcher for lab servers (`GaneshaServer`, `FuseMount`, `NamespaceNginx`): `spawn`
    runs a program in the namespace, `wait_listening` checks a port from inside it.
    """
    name: str
    address: str
    netns: str
    port_index: int
    on_spawn: Callable[[subprocess.Popen], None] | None = field(default=None, repr=False, compare=False)

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    def argv(self, args: list[str]) -> list[str]:
        """`args` run inside this host's network namespace (and nothing else changed)."""
        return [find_program("nsenter", "util-linux", extra_dirs=("/usr/bin",)), f"--net={self.netns_path}", "--",
                *args]

    def spawn(self, args: list[str], *, log: Path | None = None) -> subprocess.Popen:
        """Starts a long-running program in the namespace, in its own session; the lab network
        stops it at teardown if the caller has not. nsenter execs the program: same PID."""
        proc = spawn(self.argv(args), log=log)
        if self.on_spawn:
            self.on_spawn(proc)
        return proc

    def run(self, args: list[str], *, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        """Runs a short command in the namespace and returns its result (text output)."""
        return subprocess.run(self.argv(args), capture_output=True, text=True, timeout=timeout, **kwargs)

    def listening(self, port: int) -> bool:
        """Whether a TCP socket in the namespace listens on `port`."""
        result = self.run(["ss", "-Hltn", f"sport = :{port}"], timeout=10)
        return result.returncode == 0 and bool(result.stdout.strip())

    def wait_listening(self, proc: subprocess.Popen, port: int, *, what: str, error_tail: Callable[[], str],
                       timeout_s: float = START_TIMEOUT_S) -> None:
        """Returns once `port` listens in the namespace; otherwise stops `proc` and raises LabError."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LabError(f"{what} exited at start: {error_tail()}")
            if self.listening(port):
                return
            time.sleep(0.1)
        stop_pid(proc.pid)
        raise LabError(f"{what} did not listen on port {port} in {self.netns} within {timeout_s:g} s: {error_tail()}")


class LabNetwork:
    """Context manager: a bridge namespace and hosts on `subnet`, guarded, and removed on exit
    (even after an exception): processes first, then namespaces, the guard route last."""

    def __init__(self, subnet: str | None = None, *, prefix: str = DEFAULT_PREFIX):
        """`subnet`: a private /16 to /29; None picks the first free /24 of `AUTO_SUBNETS`."""
        self.subnet = check_subnet(subnet) if subnet else None
        if not re.fullmatch(r"[a-z][a-z0-9]{0,5}", prefix):
            raise ValueError(f"prefix '{prefix}' must be 1-6 lower-case letters or digits")
        self.prefix = prefix
        self.tag = f"{prefix}-{os.getpid()}-{next(_SEQUENCE)}"
        self.hosts: dict[str, Host] = {}
        self._addresses = iter(())
        self._processes: list[subprocess.Popen] = []
        self._namespaces: list[str] = []
        self._guarded = False

    @property
    def bridge_netns(self) -> str:
        return f"{self.tag}-{BRIDGE_NS}"

    def __enter__(self) -> LabNetwork:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Adds the guard route (refused if the subnet is routed already: another lab uses it),
        then the bridge namespace."""
        with _registry_lock():
            self._guard()
            self._record()
        self._addresses = iter(list(self.subnet.hosts())[9:])  # .10 on: low addresses read as gateways
        try:
            self._add_namespace(self.bridge_netns)
            ip("-n", self.bridge_netns, "link", "add", BRIDGE, "type", "bridge")
            ip("-n", self.bridge_netns, "link", "set", BRIDGE, "up")
        except BaseException:
            self.close()
            raise

    def _guard(self) -> None:
        candidates = [self.subnet] if self.subnet else list(ipaddress.IPv4Network(AUTO_SUBNETS).subnets(new_prefix=24))
        for subnet in candidates:
            try:
                check_no_overlap(subnet)
            except LabError:
                if self.subnet:
                    raise
                continue
            result = ip("route", "add", "unreachable", str(subnet), check=False)  # atomic
            if result.returncode == 0:
                self.subnet, self._guarded = subnet, True
                return
            if self.subnet or not guard_present(subnet):  # not a race with another lab: a real failure
                raise LabError(f"ip route add unreachable {subnet}: {result.stderr.strip()}")
        raise LabError(f"no free /24 left in {AUTO_SUBNETS} for a lab network")

    def add_host(self, name: str) -> Host:
        """A new namespace with the next free address of the subnet, linked to the bridge."""
        if not self._guarded:
            raise LabError("the lab network is not started (use it as a context manager)")
        if not _NAME.match(name) or name == BRIDGE_NS:
            raise ValueError(f"host name '{name}' must be 1-12 lower-case letters or digits, starting with a "
                             f"letter, and not '{BRIDGE_NS}'")
        if name in self.hosts:
            raise ValueError(f"host '{name}' exists already")
        try:
            address = str(next(self._addresses))
        except StopIteration:
            raise LabError(f"no free address left in {self.subnet}") from None
        host = Host(name, address, f"{self.tag}-{name}", len(self.hosts), on_spawn=self._processes.append)
        self._add_namespace(host.netns)
        port = self._port(host)
        ip("link", "add", port, "netns", self.bridge_netns, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        ip("-n", self.bridge_netns, "link", "set", port, "master", BRIDGE, "up")
        ip("-n", host.netns, "link", "set", "lo", "up")
        ip("-n", host.netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        ip("-n", host.netns, "link", "set", "eth0", "up")
        self.hosts[name] = host
        return host

    def host(self, name: str) -> Host:
        return self.hosts[name]

    def cut(self, host: Host) -> None:
        """Partitions `host`: its bridge port goes down; its sockets stay open, packets are lost."""
        ip("-n", self.bridge_netns, "link", "set", self._port(host), "down")

    def restore(self, host: Host) -> None:
        ip("-n", self.bridge_netns, "link", "set", self._port(host), "up")

    def sever(self, host: Host, other: Host) -> None:
        """Cuts the path between two hosts only (each drops what it would send the other, in
        silence): a broken link between them, with their other paths intact."""
        for a, b in ((host, other), (other, host)):
            ip("-n", a.netns, "route", "add", "blackhole", f"{b.address}/32")

    def mend(self, host: Host, other: Host) -> None:
        for a, b in ((host, other), (other, host)):
            ip("-n", a.netns, "route", "del", "blackhole", f"{b.address}/32", check=False)

    def congest(self, host: Host, rate_kbit: int, latency_ms: int) -> None:
        """What `host` sends leaves at `rate_kbit` through a queue of at most `latency_ms`:
        beyond it packets are dropped (a token bucket, `tc tbf`; this kernel has no netem)."""
        tc("-n", host.netns, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", f"{rate_kbit}kbit",
           "burst", "4kb", "latency", f"{latency_ms}ms")

    def uncongest(self, host: Host) -> None:
        tc("-n", host.netns, "qdisc", "del", "dev", "eth0", "root", check=False)

    def close(self) -> None:
        """Stops every process in the namespaces (by PID), deletes the namespaces (their veths go
        with them), then removes the guard route. Idempotent; raises LabError if something stayed."""
        problems = []
        for proc in self._processes:
            stop_pid(proc.pid)
        for netns in reversed(self._namespaces):
            problems += remove_namespace(netns)
        self._namespaces.clear()
        self._processes.clear()
        self.hosts.clear()
        with _registry_lock():
            if self._guarded:
                result = ip("route", "del", "unreachable", str(self.subnet), check=False)
                if result.returncode != 0 and guard_present(self.subnet):
                    problems.append(f"guard route for {self.subnet}: {result.stderr.strip()}")
                self._guarded = False
            _state_file(self.tag).unlink(missing_ok=True)
        if problems:
            raise LabError("lab network teardown left: " + "; ".join(problems))

    def _port(self, host: Host) -> str:
        return f"p{host.port_index}"

    def _add_namespace(self, netns: str) -> None:
        ip("netns", "add", netns)
        self._namespaces.append(netns)

    def _record(self) -> None:
        _state_file(self.tag).write_text(json.dumps({"pid": os.getpid(), "subnet": str(self.subnet)}) + "\n")


def check_subnet(subnet: str) -> ipaddress.IPv4Network:
    """A private IPv4 subnet of /16 to /29."""
    try:
        network = ipaddress.IPv4Network(subnet)
    except ValueError as exc:
        raise ValueError(f"'{subnet}' is not an IPv4 subnet: {exc}") from None
    if not network.is_private or network.is_loopback or network.is_link_local:
        raise ValueError(f"{network} is not a private subnet (e.g. 10.231.7.0/24)")
    if not 16 <= network.prefixlen <= 29:
        raise ValueError(f"{network} must be a /16 to /29")
    return network


def check_no_overlap(subnet: ipaddress.IPv4Network) -> None:
    """Refuses a subnet that overlaps a route (other than the default) or an address of the root
    namespace: lab traffic must never be confused with the machine's own networks."""
    routes = json.loads(ip("-j", "-4", "route", "show", "table", "all").stdout or "[]")
    for route in routes:
        dst = route.get("dst", "default")
        if dst == "default" or route.get("type") == "multicast":
            continue
        if ipaddress.IPv4Network(dst, strict=False).overlaps(subnet):
            kind = "a lab guard route (another lab network?)" if route.get("type") == "unreachable" else "a route"
            raise LabError(f"{subnet} overlaps {kind} of this machine: {dst} ({route.get('dev', route.get('type'))}); "
                           "choose another lab subnet")
    for link in json.loads(ip("-j", "-4", "addr").stdout or "[]"):
        for address in link.get("addr_info", []):
            if ipaddress.IPv4Network(f"{address['local']}/{address['prefixlen']}", strict=False).overlaps(subnet):
                raise LabError(f"{subnet} overlaps {address['local']} on {link['ifname']}; choose another lab subnet")


def guard_present(subnet: ipaddress.IPv4Network) -> bool:
    routes = json.loads(ip("-j", "-4", "route", "show", "type", "unreachable").stdout or "[]")
    return any(r.get("dst") == str(subnet) for r in routes)


def namespace_pids(netns: str) -> list[int]:
    result = ip("netns", "pids", netns, check=False)
    return [int(p) for p in result.stdout.split()] if result.returncode == 0 else []


def remove_namespace(netns: str) -> list[str]:
    """Stops every process in the namespace (by PID, TERM then KILL), then deletes it.
    Returns what could not be removed."""
    for pid in namespace_pids(netns):
        stop_pid(pid)
    result = ip("netns", "del", netns, check=False)
    if result.returncode != 0 and (NETNS_DIR / netns).exists():
        return [f"namespace {netns}: {result.stderr.strip()}"]
    return []


def list_namespaces(prefix: str = DEFAULT_PREFIX) -> list[str]:
    result = ip("netns", "list", check=False)
    names = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    return [n for n in names if n.startswith(f"{prefix}-")]


def cleanup_stale(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """Removes the namespaces and guard routes of lab networks whose creator process is gone
    (a crashed test run); networks of live processes are left alone. Returns what was removed."""
    removed = []
    with _registry_lock():  # no other lab takes a subnet while its stale guard is judged
        for netns in list_namespaces(prefix):
            match = re.match(rf"{re.escape(prefix)}-(\d+)-\d+-", netns)
            if match and not pid_alive(int(match.group(1))):
                problems = remove_namespace(netns)
                if problems:
                    raise LabError("; ".join(problems))
                removed.append(f"namespace {netns}")
        for state in sorted(STATE_DIR.glob(f"{prefix}-*.json")):
            try:
                record = json.loads(state.read_text())
            except (OSError, ValueError):
                continue
            if pid_alive(int(record["pid"])):
                continue
            subnet = ipaddress.IPv4Network(record["subnet"])
            if guard_present(subnet):
                ip("route", "del", "unreachable", str(subnet))
                removed.append(f"guard route {subnet}")
            state.unlink(missing_ok=True)
    return removed


@contextlib.contextmanager
def _registry_lock():
    """Serializes, across processes, taking a subnet (guard route + state file), giving it back,
    and judging stale ones."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _state_file(tag: str) -> Path:
    return STATE_DIR / f"{tag}.json"


__all__ = ["Host", "LabError", "LabNetwork", "check_subnet", "cleanup_stale", "list_namespaces"]
