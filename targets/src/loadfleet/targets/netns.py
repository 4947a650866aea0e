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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .daemon import LabError, find_program, pid_alive, spawn, stop_pid

NETNS_DIR = Path("/var/run/netns")
STATE_DIR = Path("/run/loadfleet-netns")
DEFAULT_PREFIX = "lf"
BRIDGE_NS = "sw"
BRIDGE = "br0"
START_TIMEOUT_S = 10.0
AUTO_SUBNETS = "10.231.0.0/16"  # where LabNetwork() picks a free /24
FIRST_HOST = 9  # hosts get a subnet's addresses from its 10th on: low addresses read as gateways
SHAPE_LATENCY_MS = 50  # how long a shaped link queues at most before it drops
_SEQUENCE = itertools.count(1)
_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")  # short: it goes into namespace names


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs `ip ARGS`; raises LabError with its message on failure (when `check`)."""
    return _iproute2("ip", args, check)


def tc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs `tc ARGS` (traffic control); raises LabError on failure (when `check`)."""
    return _iproute2("tc", args, check)


def _iproute2(program: str, args: tuple[str, ...], check: bool) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([find_program(program, "iproute2"), *args], capture_output=True, text=True, timeout=10)
    if check and result.returncode != 0:
        raise LabError(f"{program} {' '.join(args)}: {result.stderr.strip() or f'exit {result.returncode}'}")
    return result


@dataclass(frozen=True)
class Host:
    """A host of a lab network: its own network namespace with `address` on the lab bridge.

    Also a launcher for lab servers (`daemon.Launcher`: every server kind, `GaneshaServer`,
    `FuseMount`): `spawn` runs a program in the namespace, `start_listening` starts a server on
    the host's address and checks its port from inside. `confine` runs in each child before it
    execs (a CPU cap of the host, caps.py).
    """

    name: str
    address: str
    netns: str
    port_index: int
    on_spawn: Callable[[subprocess.Popen[bytes]], None] | None = field(default=None, repr=False, compare=False)
    confine: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    def argv(self, args: list[str]) -> list[str]:
        """`args` run inside this host's network namespace (and nothing else changed)."""
        return [
            find_program("nsenter", "util-linux", extra_dirs=("/usr/bin",)),
            f"--net={self.netns_path}",
            "--",
            *args,
        ]

    def spawn(self, args: list[str], *, log: Path | None = None) -> subprocess.Popen[bytes]:
        """Starts a long-running program in the namespace, in its own session; the lab network
        stops it at teardown if the caller has not. nsenter execs the program: same PID."""
        proc = spawn(self.argv(args), log=log, preexec=self.confine)
        if self.on_spawn:
            self.on_spawn(proc)
        return proc

    def run(self, args: list[str], *, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Runs a short command in the namespace and returns its result (text output)."""
        return subprocess.run(self.argv(args), capture_output=True, text=True, timeout=timeout, **kwargs)

    def listening(self, port: int) -> bool:
        """Whether a TCP socket in the namespace listens on `port`."""
        result = self.run(["ss", "-Hltn", f"sport = :{port}"], timeout=10)
        return result.returncode == 0 and bool(result.stdout.strip())

    def check_address(self, address: str) -> None:
        """The one place a lab server may listen beyond loopback: this host's own address, in a
        namespace that exists, behind the lab network's guard route."""
        if address != self.address:
            raise ValueError(f"'{address}' is not the address of lab host {self.name} ({self.address})")
        if not self.netns_path.exists():
            raise ValueError(f"lab host {self.name} has no namespace {self.netns} (network closed?)")
        if not guarded(address):
            raise ValueError(f"'{address}' of lab host {self.name} has no guard route in the root namespace")

    def check_peer(self, address: str) -> None:
        """A balancer on this host forwards to loopback (its own namespace's) or to hosts of the
        same lab network: addresses under the same guard route as this host's."""
        try:
            peer = ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"'{address}' is not an IP address") from None
        if peer.is_loopback:
            return
        subnet = guard_subnet(self.address)
        if subnet is None or peer not in subnet:
            raise ValueError(
                f"'{address}' is not on the lab network of host {self.name} "
                f"({subnet or 'no guard route'}): only loopback or lab hosts"
            )

    def start_listening(
        self,
        argv: list[str],
        host: str,
        port: int,
        *,
        what: str,
        error_tail: Callable[[], str],
        log: Path | None = None,
        timeout_s: float = START_TIMEOUT_S,
    ) -> subprocess.Popen[bytes]:
        """Starts a server in the namespace; returns once `port` listens there (refused if taken)."""
        self.check_address(host)
        if self.listening(port):
            raise LabError(f"{what} cannot listen on {host}:{port}: the port is taken on lab host {self.name}")
        proc = self.spawn(argv, log=log)
        self.wait_listening(proc, port, what=what, error_tail=error_tail, timeout_s=timeout_s)
        return proc

    def wait_listening(
        self,
        proc: subprocess.Popen[bytes],
        port: int,
        *,
        what: str,
        error_tail: Callable[[], str],
        timeout_s: float = START_TIMEOUT_S,
    ) -> None:
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
        self._addresses: Iterator[ipaddress.IPv4Address] = iter(())
        self._processes: list[subprocess.Popen[bytes]] = []
        self._namespaces: list[str] = []
        self._guarded = False
        self._owner: Path | None = None  # set by keep(): the network outlives this process

    @property
    def bridge_netns(self) -> str:
        return f"{self.tag}-{BRIDGE_NS}"

    def __enter__(self) -> LabNetwork:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Adds the guard route (refused if the subnet is routed already: another lab uses it),
        then the bridge namespace."""
        with _registry_lock():
            self._guard()
            self._record()
        assert self.subnet is not None  # _guard picked one (or raised)
        self._addresses = iter(host_addresses(self.subnet))
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

    def add_host(self, name: str, *, confine: Callable[[], None] | None = None) -> Host:
        """A new namespace with the next free address of the subnet, linked to the bridge.
        `confine` runs in every process started on it before exec (its CPU cap, caps.py)."""
        if not self._guarded or self.subnet is None:  # start() sets both
            raise LabError("the lab network is not started (use it as a context manager)")
        if not _NAME.match(name) or name == BRIDGE_NS:
            raise ValueError(
                f"host name '{name}' must be 1-12 lower-case letters or digits, starting with a "
                f"letter, and not '{BRIDGE_NS}'"
            )
        if name in self.hosts:
            raise ValueError(f"host '{name}' exists already")
        try:
            address = str(next(self._addresses))
        except StopIteration:
            raise LabError(f"no free address left in {self.subnet}") from None
        host = Host(
            name, address, f"{self.tag}-{name}", len(self.hosts), on_spawn=self._processes.append, confine=confine
        )
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
        tc(
            "-n",
            host.netns,
            "qdisc",
            "replace",
            "dev",
            "eth0",
            "root",
            "tbf",
            "rate",
            f"{rate_kbit}kbit",
            "burst",
            "4kb",
            "latency",
            f"{latency_ms}ms",
        )

    def uncongest(self, host: Host) -> None:
        tc("-n", host.netns, "qdisc", "del", "dev", "eth0", "root", check=False)

    def shape(self, host: Host, rate_kbit: int, *, latency_ms: int = SHAPE_LATENCY_MS) -> None:
        """Both directions of `host`'s link run at `rate_kbit`, as on a slower wire (e.g. Fast
        Ethernet, 100 Mbit/s): a token bucket (`tc tbf`) on the host's eth0 (what it sends) and on
        its bridge port (what it receives), each queueing at most `latency_ms`."""
        # The bucket must hold what arrives in one timer tick (rate / HZ; HZ is at most 1000 and
        # at least 250) and a whole GSO packet, or the rate is never reached.
        burst = max(rate_kbit * 1000 // 8 // 250, 64 * 1024)
        for netns, dev in ((host.netns, "eth0"), (self.bridge_netns, self._port(host))):
            tc(
                "-n",
                netns,
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                f"{rate_kbit}kbit",
                "burst",
                str(burst),
                "latency",
                f"{latency_ms}ms",
            )

    def keep(self, owner: Path) -> dict[str, Any]:
        """Hands the network over to `owner`, a file (a lab's state file) that names its tag: the
        network then outlives this process, `cleanup_stale` leaves it alone while the owner names
        it, and `LabNetwork.reattach(record)` in any process takes it back (to close it)."""
        self._owner = Path(owner).resolve()
        with _registry_lock():
            self._record()
        return self.record()

    def record(self) -> dict[str, Any]:
        """What another process needs to take the network back: `reattach(record)`."""
        return {
            "tag": self.tag,
            "prefix": self.prefix,
            "subnet": str(self.subnet),
            "bridge": self.bridge_netns,
            "namespaces": list(self._namespaces),
            "hosts": [
                {"name": h.name, "address": h.address, "netns": h.netns, "port_index": h.port_index}
                for h in self.hosts.values()
            ],
        }

    @classmethod
    def reattach(cls, record: dict[str, Any]) -> LabNetwork:
        """The network of `record` (from `record()`), as started: `close()` removes it, `cut`,
        `restore` and `shape` work on its hosts. No new hosts."""
        net = cls(record["subnet"], prefix=record["prefix"])
        net.tag, net._guarded = record["tag"], True
        net._namespaces = list(record["namespaces"])
        for h in record["hosts"]:
            net.hosts[h["name"]] = Host(h["name"], h["address"], h["netns"], h["port_index"])
        return net

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
                assert self.subnet is not None  # _guard set both
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
        # Always the creator's pid (a record must be judgeable by it); a kept network also names
        # its owner file, which then decides (`_alive`).
        owner = {"owner": str(self._owner)} if self._owner else {}
        record = {"pid": os.getpid(), **owner, "tag": self.tag, "subnet": str(self.subnet)}
        _state_file(self.tag).write_text(json.dumps(record) + "\n")


def host_addresses(subnet: ipaddress.IPv4Network) -> list[ipaddress.IPv4Address]:
    """The addresses a LabNetwork on `subnet` gives its hosts, in the order they are added."""
    return list(subnet.hosts())[FIRST_HOST:]


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
            raise LabError(
                f"{subnet} overlaps {kind} of this machine: {dst} ({route.get('dev', route.get('type'))}); "
                "choose another lab subnet"
            )
    for link in json.loads(ip("-j", "-4", "addr").stdout or "[]"):
        for address in link.get("addr_info", []):
            if ipaddress.IPv4Network(f"{address['local']}/{address['prefixlen']}", strict=False).overlaps(subnet):
                raise LabError(f"{subnet} overlaps {address['local']} on {link['ifname']}; choose another lab subnet")


def guarded(address: str) -> bool:
    """Whether an `unreachable` guard route of the root namespace covers `address`."""
    return guard_subnet(address) is not None


def guard_subnet(address: str) -> ipaddress.IPv4Network | None:
    """The subnet of the `unreachable` guard route that covers `address` (None: none does)."""
    routes = json.loads(ip("-j", "-4", "route", "show", "type", "unreachable").stdout or "[]")
    for route in routes:
        if route.get("dst", "default") != "default":
            network = ipaddress.IPv4Network(route["dst"], strict=False)
            if ipaddress.IPv4Address(address) in network:
                return network
    return None


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
    (a crashed test run) or, for a kept network (`keep`), whose owner file no longer names it;
    live networks are left alone. Returns what was removed."""
    removed = []
    with _registry_lock():  # no other lab takes a subnet while its stale guard is judged
        records = {}
        for state in sorted(STATE_DIR.glob(f"{prefix}-*.json")):
            try:
                records[state] = json.loads(state.read_text())
            except (OSError, ValueError):
                continue
        kept = {r["tag"] for r in records.values() if r.get("owner") and _alive(r)}
        for netns in list_namespaces(prefix):
            match = re.match(rf"({re.escape(prefix)}-(\d+)-\d+)-", netns)
            if match and match.group(1) not in kept and not pid_alive(int(match.group(2))):
                problems = remove_namespace(netns)
                if problems:
                    raise LabError("; ".join(problems))
                removed.append(f"namespace {netns}")
        for state, record in records.items():
            if _alive(record):
                continue
            subnet = ipaddress.IPv4Network(record["subnet"])
            if guard_present(subnet):
                ip("route", "del", "unreachable", str(subnet))
                removed.append(f"guard route {subnet}")
            state.unlink(missing_ok=True)
    return removed


def _alive(record: dict[str, Any]) -> bool:
    """A network's creator is alive, or its owner file still names it. A record with neither a
    pid nor an owner (written by an early version: `"pid": null`) cannot be alive: stale."""
    if record.get("owner"):
        try:
            # The tag as a JSON string: "lab-1-1" must not match "lab-1-12".
            return f'"{record.get("tag")}"' in Path(record["owner"]).read_text()
        except OSError:
            return False
    pid = record.get("pid")
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and pid_alive(pid)


@contextlib.contextmanager
def _registry_lock() -> Iterator[None]:
    """Serializes, across processes, taking a subnet (guard route + state file), giving it back,
    and judging stale ones."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _state_file(tag: str) -> Path:
    return STATE_DIR / f"{tag}.json"


__all__ = ["Host", "LabError", "LabNetwork", "check_subnet", "cleanup_stale", "guarded", "list_namespaces"]
