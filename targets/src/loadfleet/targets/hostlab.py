"""A lab on hosts of its own (the spec's `hosts:` sections, hostspec.py): the lab network, each
host's caps, the lab's controller with its certificates, and the load agents — everything
`Lab` (lab.py) needs beyond loopback servers.

The network outlives `loadfleet-lab up`: it is kept (`LabNetwork.keep`) by the lab's state file,
`lab.json`, which records it (tag, subnet, namespaces, hosts), the CPU cgroups, the controller's
address and the operator's certificate. `teardown(state)` removes it from any process:
whatever still runs in its namespaces, the namespaces, the guard route, the cgroups.

Each host with servers gets a monitor (`loadfleet-agent --monitor`, named after its host) when
the lab's agents have a controller: it reports the host's CPU, memory and network, each
server's processes (by PID file: the lab's hosts share one process table) and HAProxy's and
Varnish's own counters, so a run shows what ran out (its steps' bottleneck) with nothing
started by hand. It runs under the host's caps, like everything on the host (about 1 % of a
CPU: one sample a second).

The controller serves TLS with client certificates on its host's address (`loadfleet certs`
makes a CA, its certificate, one per agent and `operator-lab` into `<state>/pki`): a namespace
address is beyond loopback, where the controller requires both. `operator_env(state)` gives a
command the operator's credentials, and `run_on_host` runs it inside a host's namespace — how
`loadfleet run` reaches the lab (`loadfleet-lab exec`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .caps import CpuCap, CpuGroup, remove_group
from .daemon import LabError, find_program, log_tail
from .netns import Host, LabNetwork
from .spec import HostSpec, LabSpec

LAB_PREFIX = "lab"  # namespaces lab-<creator pid>-<n>-<host>; test networks are lf-...
NFS_PORT = 2049
AGENTS_TIMEOUT_S = 60.0
CONTROLLER_NAME = "lab-controller"
OPERATOR = "lab"
CERTS_TIMEOUT_S = 60


def program(name: str, package: str = "loadfleet (make setup)") -> str:
    """A loadfleet program: beside this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else find_program(name, package, extra_dirs=())


@dataclass
class FleetProcess:
    """The lab's controller or one of its agents, recorded in lab.json like a server."""

    name: str
    kind: str
    url: str
    pid: int
    on: str  # its lab host

    @property
    def pids(self) -> list[int]:
        return [self.pid]


@dataclass
class LabHosts:
    """The hosts of one lab: built by `start`, then `docroot`/`launcher` per server, then `start_fleet`."""

    spec: LabSpec
    state_dir: Path
    state_file: Path
    net: LabNetwork | None = None
    hosts: dict[str, Host] = field(default_factory=dict)
    groups: list[CpuGroup] = field(default_factory=list)
    mounts: dict[str, Path] = field(default_factory=dict)  # host -> its mount of the NFS export
    controller: dict[str, Any] | None = None

    def start(self, save: Callable[[], None]) -> None:
        """The guarded network, kept by the state file from the start (so `down` finds it even if
        `up` dies), and every host with its caps."""
        self.net = LabNetwork(self.spec.subnet, prefix=LAB_PREFIX)
        self.net.start()
        self.net.keep(self.state_file)
        save()
        for spec in self.spec.hosts:
            group = CpuGroup.create(f"{self.net.tag}-{spec.name}", spec.cpu_pct) if spec.cpu_pct else None
            if group:
                self.groups.append(group)
            self.hosts[spec.name] = self.net.add_host(spec.name, confine=CpuCap(spec.cpus, group).confine())
            save()
            if spec.link_mbit:
                self.net.shape(self.hosts[spec.name], spec.link_mbit * 1000)

    def host_of(self, role: Callable[[HostSpec], bool]) -> tuple[HostSpec, Host] | None:
        for spec in self.spec.hosts:
            if role(spec):
                return spec, self.hosts[spec.name]
        return None

    def start_fleet(self, add: Callable[[FleetProcess], None], served: dict[str, list[Any]] | None = None) -> None:
        """The controller (if the lab has one), the agents, and a monitor on each host of
        `served` (host name -> the servers started on it) when there is a controller to
        report to; returns once they are connected."""
        found = self.host_of(lambda h: bool(h.controller_port))
        agents = [(s, self.hosts[s.name]) for s in self.spec.hosts if s.agent]
        address = self.controller["address"] if self.controller else self.spec.controller
        monitored = {name: servers for name, servers in (served or {}).items() if servers} if found or address else {}
        if found:
            spec, host = found
            self._make_pki(host.address, [s.name for s, _ in agents] + list(monitored))
            assert spec.controller_port  # host_of found the host with one
            add(self._start_controller(host, spec.controller_port))
            address = self.controller["address"] if self.controller else None
        for spec, host in agents:
            assert address is not None  # agents have a controller: hostspec checked it
            add(self._start_agent(spec, host, address))
        for name, servers in monitored.items():
            assert address is not None  # monitored only with a controller to report to
            add(self._start_monitor(self.hosts[name], servers, address))
        if (agents or monitored) and self.controller:
            self._wait_for_agents({s.name for s, _ in agents} | set(monitored))

    def record(self) -> dict[str, Any]:
        return {
            "network": self.net.record() if self.net else None,
            "cgroups": [str(g.path) for g in self.groups],
            "controller": self.controller or ({"address": self.spec.controller} if self.spec.controller else None),
        }

    # ------------------------------------------------------------ the controller and agents

    def _make_pki(self, address: str, agents: list[str]) -> None:
        """A CA, the controller's certificate for `address`, the operator's and the agents'."""
        pki = self.state_dir / "pki"
        shutil.rmtree(pki, ignore_errors=True)  # a fresh CA at every up: nothing of an old lab is trusted
        for args in (
            ["init"],
            ["controller", "--name", CONTROLLER_NAME, "--ip", address],
            ["operator", OPERATOR],
            *([["agent", *agents]] if agents else []),
        ):
            result = subprocess.run(
                [program("loadfleet"), "certs", args[0], "--dir", str(pki), *args[1:]],
                capture_output=True,
                text=True,
                timeout=CERTS_TIMEOUT_S,
            )
            if result.returncode != 0:
                raise LabError(f"loadfleet certs {args[0]}: {result.stderr.strip()[-500:]}")

    def _start_controller(self, host: Host, port: int) -> FleetProcess:
        pki, directory = self.state_dir / "pki", self.state_dir / "controller"
        directory.mkdir(parents=True, exist_ok=True)
        log = directory / "controller.log"
        address = f"{host.address}:{port}"
        proc = host.spawn(
            [
                program("loadfleet"),
                "controller",
                "--listen",
                address,
                "--runs-dir",
                str(self.state_dir / "runs"),
                "--tls-cert",
                str(pki / "controller.crt"),
                "--tls-key",
                str(pki / "controller.key"),
                "--tls-ca",
                str(pki / "ca.crt"),
            ],
            log=log,
        )
        self.controller = {
            "address": address,
            "host": host.name,
            "ca": str(pki / "ca.crt"),
            "cert": str(pki / f"operator-{OPERATOR}.crt"),
            "key": str(pki / f"operator-{OPERATOR}.key"),
        }
        process = FleetProcess("controller", "controller", address, proc.pid, host.name)
        host.wait_listening(proc, port, what=f"controller on {host.name}", error_tail=lambda: log_tail(log))
        return process

    def _tls(self, agent: str) -> list[str]:
        """An agent's TLS flags for the lab's own controller (none for one it did not start)."""
        pki = self.state_dir / "pki"
        if not self.controller:
            return []
        return [
            "--tls-ca",
            str(pki / "ca.crt"),
            "--tls-cert",
            str(pki / f"agent-{agent}.crt"),
            "--tls-key",
            str(pki / f"agent-{agent}.key"),
        ]

    def _start_monitor(self, host: Host, servers: list[Any], controller: str) -> FleetProcess:
        directory = self.state_dir / host.name / "monitor"
        argv = [
            program("loadfleet-agent"),
            "--controller",
            controller,
            "--id",
            host.name,
            *monitor_options(host.name, servers, directory),
            *self._tls(host.name),
        ]
        proc = host.spawn(argv, log=directory / "agent.log")
        return FleetProcess(f"{host.name}-monitor", "monitor", controller, proc.pid, host.name)

    def _start_agent(self, spec: HostSpec, host: Host, controller: str) -> FleetProcess:
        directory = self.state_dir / spec.name
        directory.mkdir(parents=True, exist_ok=True)
        assert self.net is not None  # agents run on hosts of the lab's network
        tls = self._tls(spec.name)
        proc = host.spawn(
            [
                program("loadfleet-agent"),
                "--controller",
                controller,
                "--id",
                spec.name,
                "--cores",
                str(spec.cores),
                "--engine",
                program("loadfleet-engine"),
                "--spool-dir",
                str(directory / "spool"),
                "--allow-targets",
                str(self.net.subnet),
                *tls,
            ],
            log=directory / "agent.log",
        )
        return FleetProcess(spec.name, "agent", controller, proc.pid, spec.name)

    def _wait_for_agents(self, names: set[str]) -> None:
        assert self.controller is not None  # waited for with the lab's own controller only
        host = self.hosts[self.controller["host"]]
        deadline = time.monotonic() + AGENTS_TIMEOUT_S
        connected: set[str] = set()
        while not names <= connected:
            if time.monotonic() > deadline:
                missing = sorted(names - connected)
                raise LabError(
                    f"agents {', '.join(missing)} did not connect to the controller within "
                    f"{AGENTS_TIMEOUT_S:g} s: {log_tail(self.state_dir / missing[0] / 'agent.log')}"
                )
            result = host.run(
                [program("loadfleet"), "agents", "--json"],
                timeout=30,
                env={**os.environ, **operator_env(self.record())},
            )
            if result.returncode == 0:
                connected = {
                    a["agentId"] for a in json.loads(result.stdout or "[]") if a.get("state", "").lower() != "lost"
                }
            time.sleep(0.3)


def monitor_options(host: str, servers: list[Any], pid_dir: Path) -> list[str]:
    """A lab host's monitor flags: its servers' URLs as targets, each server's processes by a
    PID file written into `pid_dir` (a process name would count every host's: namespaces
    share the process table), HAProxy's stats socket and Varnish's directory. A process
    group is named by the server's kind when the host has one server ("haproxy"), else by
    the server's name; a server with several PIDs (PHP's front and pool) gets one each."""
    options = ["--monitor", "--role", host]
    pid_dir.mkdir(parents=True, exist_ok=True)
    for server in servers:
        label = server.kind if len(servers) == 1 else server.name
        options += [f"--target={server.url}"] if server.url.startswith(("http://", "https://")) else []
        for i, pid in enumerate(server.pids):
            name = label if len(server.pids) == 1 else f"{label}-{i + 1}"
            pid_file = pid_dir / f"{name}.pid"
            pid_file.write_text(f"{pid}\n")
            options.append(f"--pid-file={name}={pid_file}")
        if server.kind == "haproxy":
            options.append(f"--haproxy-stats={server.stats_socket}")
        elif server.kind == "varnish":
            options.append(f"--varnish-stats={server.workdir}")
    return options


def operator_env(state: dict[str, Any]) -> dict[str, str]:
    """The environment a `loadfleet` command needs to reach the lab's controller as its operator."""
    controller = state.get("controller") or {}
    env = {"LOADFLEET_CONTROLLER": controller["address"]} if controller.get("address") else {}
    if controller.get("ca"):
        env.update(
            LOADFLEET_TLS_CA=controller["ca"],
            LOADFLEET_TLS_CERT=controller["cert"],
            LOADFLEET_TLS_KEY=controller["key"],
        )
    return env


def run_on_host(state: dict[str, Any], host_name: str, argv: list[str]) -> int:
    """Runs `argv` in a lab host's namespace with the operator's environment (and the venv's
    programs first on PATH); returns its exit code. Standard input and output are the caller's."""
    network = state.get("network") or {}
    hosts = {h["name"]: h for h in network.get("hosts", [])}
    if host_name not in hosts:
        raise LabError(
            f"no lab host '{host_name}' in this state directory"
            + (f" (hosts: {', '.join(hosts)})" if hosts else " (no lab with hosts is up)")
        )
    netns = hosts[host_name]["netns"]
    env = {
        **os.environ,
        **operator_env(state),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    nsenter = find_program("nsenter", "util-linux", extra_dirs=("/usr/bin",))
    return subprocess.run([nsenter, f"--net=/var/run/netns/{netns}", "--", *argv], env=env).returncode


def teardown(state: dict[str, Any]) -> list[str]:
    """Removes a lab's network (whatever still runs in it, its namespaces, the guard route) and
    its CPU cgroups; idempotent. Returns what could not be removed."""
    problems = []
    if state.get("network"):
        try:
            LabNetwork.reattach(state["network"]).close()
        except LabError as exc:
            problems.append(str(exc))
    for path in state.get("cgroups", []):
        try:
            remove_group(Path(path))
        except LabError as exc:
            problems.append(str(exc))
    return problems


__all__ = ["FleetProcess", "LabHosts", "monitor_options", "operator_env", "run_on_host", "teardown"]
