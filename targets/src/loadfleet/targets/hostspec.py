"""The hosts sections of a lab spec: servers, the NFS server, a controller and load agents, each
on a host of its own — a network namespace with its own address on the lab bridge (netns.py),
so that traffic crosses a link that can be shaped and cut.

    network: {subnet: 10.231.60.0/24}      # optional: fixed addresses (hosts in spec order from .10)
    hosts:
      ctrl: {controller: true}             # the lab's controller (TLS, the lab's certificates), port 7700
      nfs:  {nfs: true}                    # nfs-ganesha exports the workload; web hosts mount it
      web1: {servers: [nginx], cpus: [0], cpu_pct: 50, link_mbit: 100}
      web2: {servers: [{kind: apache, mpm: worker, profile: stock}]}
      lb:   {servers: [{name: lb, kind: haproxy, backends: [web1, web2]}]}
    agents: {count: 2, cores: 1, cpus: [1]}   # hosts agent1, agent2, one loadfleet-agent each

A host's servers listen on its address (port 80 by default, 443 with tls, 3306 for MariaDB); a
server's name defaults to its host's when the host has one server. Caps (`cpus`, `cpu_pct`,
`link_mbit`) hold for everything on the host. Agents dial the lab's controller, or with
`agents.controller: ADDRESS:PORT` one the lab does not start (inside the lab's fixed subnet:
nothing outside the lab's namespaces is reachable from them; plaintext, so run it with
`--insecure` on that lab address).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from .netns import BRIDGE_NS, FIRST_HOST, check_subnet
from .spec import CAP_CHECKS, HostSpec, Placed, _is_int, _split_listen

HOST_FIELDS = ("servers", "controller", "nfs", "cpus", "cpu_pct", "link_mbit")
AGENT_FIELDS = ("count", "cores", "cpus", "cpu_pct", "link_mbit", "controller")
DEFAULT_CONTROLLER_PORT = 7700
AGENT_HOST_PREFIX = "agent"
MAX_AGENTS = 32
MAX_AGENT_CORES = 16
MAX_HOSTS = 64
MAX_LINK_MBIT = 100_000
_HOST_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")  # it goes into namespace names


@dataclass(frozen=True)
class HostsSection:
    hosts: tuple[HostSpec, ...]
    placed: list[Placed]  # the hosts' server entries, for spec.py to parse
    subnet: str | None
    controller: str | None  # a controller the agents dial that the lab does not start


def parse_hosts(doc: dict[str, Any], nfs: bool, problems: list[str]) -> HostsSection:
    if "servers" in doc:
        problems.append("servers: a lab with hosts places its servers on them (hosts.<name>.servers)")
    subnet = _network(doc.get("network", {}), problems)
    entries = doc.get("hosts")
    if not isinstance(entries, dict) or not entries:
        problems.append("hosts: give a mapping of host names to hosts, e.g. {web1: {servers: [nginx]}}")
        entries = {}
    hosts: list[HostSpec] = []
    placed: list[Placed] = []
    for name, entry in entries.items():
        host = _host(name, {} if entry is None else entry, placed, problems)
        if host:
            hosts.append(host)
    agents, controller = _agents(doc.get("agents"), subnet, {str(n) for n in entries}, problems)
    hosts += agents
    _role_problems(hosts, nfs, controller, problems)
    if subnet and len(hosts) > ipaddress.IPv4Network(subnet).num_addresses - FIRST_HOST - 2:
        problems.append(f"network.subnet: {subnet} has no room for {len(hosts)} hosts (from its 10th address on)")
    if len(hosts) > MAX_HOSTS:
        problems.append(f"hosts: {len(hosts)} hosts (agents included) are more than {MAX_HOSTS}")
    return HostsSection(tuple(hosts), placed, subnet, controller)


def _network(doc: object, problems: list[str]) -> str | None:
    if not isinstance(doc, dict) or set(doc) - {"subnet"}:
        problems.append("network: must be {subnet: A.B.C.D/N}")
        return None
    if "subnet" not in doc:
        return None
    try:
        return str(check_subnet(str(doc["subnet"])))
    except ValueError as exc:
        problems.append(f"network.subnet: {exc}")
        return None


def _host(name: object, entry: object, placed: list[Placed], problems: list[str]) -> HostSpec | None:
    where = f"hosts.{name}"
    if not isinstance(name, str) or not _HOST_NAME.match(name) or name == BRIDGE_NS:
        problems.append(
            f"{where}: a host name is 1-12 lower-case letters or digits, starting with a letter (not '{BRIDGE_NS}')"
        )
        return None
    if not isinstance(entry, dict):
        problems.append(f"{where}: must be a mapping ({', '.join(HOST_FIELDS)})")
        return None
    before = len(problems)
    for key in entry:
        if key not in HOST_FIELDS:
            problems.append(f"{where}.{key}: not a field of a host ({', '.join(HOST_FIELDS)})")
    servers = entry.get("servers", [])
    if not isinstance(servers, list):
        problems.append(f"{where}.servers: must be a list of servers")
        servers = []
    for i, server in enumerate(servers):
        placed.append(
            Placed(f"{where}.servers[{i}]", server, name if len(servers) == 1 else f"{name}-{i + 1}", on=name)
        )
    controller_port = _controller_port(where, entry.get("controller", False), problems)
    if not isinstance(entry.get("nfs", False), bool):
        problems.append(f"{where}.nfs: {entry['nfs']!r} must be true or false")
    caps = _caps(where, entry, problems)
    if len(problems) > before:
        return None
    return HostSpec(name, controller_port=controller_port, nfs=entry.get("nfs", False), **caps)


def _controller_port(where: str, value: object, problems: list[str]) -> int | None:
    if value is False:
        return None
    if value is True:
        return DEFAULT_CONTROLLER_PORT
    port = value.get("port", DEFAULT_CONTROLLER_PORT) if isinstance(value, dict) and set(value) <= {"port"} else None
    if not _is_int(port) or not 1 <= port <= 65535:
        problems.append(f"{where}.controller: must be true, false or {{port: 1..65535}}")
        return None
    return port


def _caps(where: str, entry: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    caps = {}
    checks = {
        **CAP_CHECKS,
        "link_mbit": (
            lambda v: _is_int(v) and 1 <= v <= MAX_LINK_MBIT,
            f"an integer from 1 to {MAX_LINK_MBIT} (Mbit/s)",
        ),
    }
    for key, (valid, expected) in checks.items():
        if key in entry:
            if valid(entry[key]):
                caps[key] = tuple(entry[key]) if key == "cpus" else entry[key]
            else:
                problems.append(f"{where}.{key}: {entry[key]!r} must be {expected}")
    return caps


def _agents(doc: object, subnet: str | None, taken: set[str], problems: list[str]) -> tuple[list[HostSpec], str | None]:
    if doc is None:
        return [], None
    if not isinstance(doc, dict):
        problems.append(f"agents: must be a mapping ({', '.join(AGENT_FIELDS)})")
        return [], None
    before = len(problems)
    for key in doc:
        if key not in AGENT_FIELDS:
            problems.append(f"agents.{key}: not a field of agents ({', '.join(AGENT_FIELDS)})")
    count, cores = doc.get("count", 1), doc.get("cores", 1)
    if not _is_int(count) or not 1 <= count <= MAX_AGENTS:
        problems.append(f"agents.count: {count!r} must be an integer from 1 to {MAX_AGENTS}")
    if not _is_int(cores) or not 1 <= cores <= MAX_AGENT_CORES:
        problems.append(f"agents.cores: {cores!r} must be an integer from 1 to {MAX_AGENT_CORES}")
    caps = _caps("agents", doc, problems)
    controller = _given_controller(doc.get("controller"), subnet, problems)
    if len(problems) > before:
        return [], None
    names = [f"{AGENT_HOST_PREFIX}{i}" for i in range(1, count + 1)]
    for name in sorted(taken.intersection(names)):
        problems.append(f"hosts.{name}: the name of an agent host (agents.count makes {names[0]}..{names[-1]})")
    return [HostSpec(name, agent=True, cores=cores, **caps) for name in names], controller


def _given_controller(value: object, subnet: str | None, problems: list[str]) -> str | None:
    if value is None:
        return None
    host, port = _split_listen(str(value))
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        address = None
    if port is None or address is None:
        problems.append(f"agents.controller: {value!r} must be ADDRESS:PORT")
    elif not subnet or address not in ipaddress.IPv4Network(subnet):
        # Nothing outside the lab's namespaces is reachable from its hosts.
        problems.append(
            f"agents.controller: {value} must be inside the lab's network.subnet "
            "(give one; the agents reach nothing outside it)"
        )
    else:
        return f"{address}:{port}"
    return None


def _role_problems(hosts: list[HostSpec], nfs: bool, given_controller: str | None, problems: list[str]) -> None:
    controllers = [h.name for h in hosts if h.controller_port]
    nfs_hosts = [h.name for h in hosts if h.nfs]
    if len(controllers) > 1:
        problems.append(f"hosts: only one host runs the lab's controller ({', '.join(controllers)})")
    if len(nfs_hosts) > 1:
        problems.append(f"hosts: only one host runs the NFS server ({', '.join(nfs_hosts)})")
    if nfs and not nfs_hosts:
        problems.append("docroot.nfs: a lab with hosts serves NFS from a host: give one `nfs: true`")
    agents = any(h.agent for h in hosts)
    if agents and not controllers and not given_controller:
        problems.append("agents: they need a controller: a host with `controller: true` or agents.controller")
    if controllers and given_controller:
        problems.append(f"agents.controller: the lab starts a controller already (hosts.{controllers[0]}.controller)")


__all__ = ["DEFAULT_CONTROLLER_PORT", "HostsSection", "parse_hosts"]
