"""The real system across the hosts of a lab network (loadfleet.targets.netns): a controller,
load agents and nginx servers, each in its own network namespace, optionally a monitor-only
agent on web1's host. Everything it starts is stopped by PID with the network, and
`Leftovers` checks afterwards that nothing stayed.

Safety: the network is a free 10.231.X.0/24, guarded by `ip route add unreachable` before the
first packet; load goes only to the namespaces it created.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from pathlib import Path

import psutil

from loadfleet.targets.daemon import pid_alive
from loadfleet.targets.netns import STATE_DIR, LabNetwork, guard_present, list_namespaces
from loadfleet.targets.netns_nginx import NamespaceNginx
from loadfleet.targets.workload import generate_tree
from support.cluster import write_plan
from support.pki import OPERATOR, make_pki
from support.procs import program

CONTROLLER_PORT = 7700
WEB_PORT = 8080
FAKETIME_LIBRARY = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"  # Debian's faketime


def root_veths() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


class Leftovers:
    """What a lab network must not leave behind: checked after teardown."""

    def __init__(self):
        self.veths = root_veths()
        self.pids: list[int] = []

    def check(self, net: LabNetwork) -> None:
        assert not any(n.startswith(f"{net.tag}-") for n in list_namespaces(net.prefix)), "a namespace stayed"
        assert root_veths() <= self.veths, "a veth stayed"
        assert not guard_present(net.subnet), "the guard route stayed"
        assert not (STATE_DIR / f"{net.tag}.json").exists()
        alive = [pid for pid in self.pids if pid_alive(pid)]
        assert not alive, f"processes stayed: {alive}"


class FleetLab:
    """The controller, the load agents `agent_ids` and nginx web1 and web2, each on its own
    host; with `monitor`, a monitor-only agent on web1's host reports it (its veth traffic, its
    nginx processes). Beyond loopback the controller serves TLS with client certificates."""

    def __init__(
        self, net: LabNetwork, tmp: Path, leftovers: Leftovers, *, agent_ids=("a1", "a2"), monitor: bool = True
    ):
        self.net, self.tmp, self.leftovers = net, tmp, leftovers
        self.docroot = tmp / "docroot"
        generate_tree(self.docroot, scale=0.2, seed=7)
        self.ctrl = net.add_host("ctrl")
        self.address = f"{self.ctrl.address}:{CONTROLLER_PORT}"
        self.pki = make_pki(
            tmp / "pki", controller_ips=(self.ctrl.address,), agents=(*agent_ids, *(["web1-host"] if monitor else []))
        )
        self.controller = self._spawn(
            self.ctrl,
            "controller",
            [
                program("loadfleet"),
                "controller",
                "--listen",
                self.address,
                "--runs-dir",
                str(tmp / "runs"),
                *self.pki.server_args(),
            ],
        )
        self.webs = []
        for name in ("web1", "web2"):
            web = NamespaceNginx(net.add_host(name), WEB_PORT, self.docroot, tmp / "nginx", name)
            web.start()
            leftovers.pids.append(web.pid)
            self.webs.append(web)
        self.ctrl.wait_listening(
            self.controller,
            CONTROLLER_PORT,
            what="controller",
            error_tail=lambda: (tmp / "controller.log").read_text()[-2000:],
        )
        self.monitor = None
        if monitor:
            web1 = self.webs[0]
            (tmp / "web1.pid").write_text(str(web1.pid))
            self.monitor = self._spawn(
                web1.lab_host,
                "web1-host",
                [
                    program("loadfleet-agent"),
                    "--controller",
                    self.address,
                    "--id",
                    "web1-host",
                    "--monitor",
                    f"--target={web1.url}",
                    f"--pid-file=nginx={tmp / 'web1.pid'}",
                    *self.pki.client_args("agent", "web1-host"),
                ],
            )
        self.hosts = {agent_id: net.add_host(agent_id) for agent_id in agent_ids}
        self.agents: dict[str, subprocess.Popen] = {}
        for agent_id in agent_ids:
            self.start_agent(agent_id)

    def start_agent(self, agent_id: str, *, clock_ahead_s: float = 0) -> subprocess.Popen:
        """`clock_ahead_s`: the agent and its engines see a wall clock that far ahead
        (libfaketime: their monotonic clocks stay as they are)."""
        faked = (
            ["env", f"FAKETIME=+{clock_ahead_s:g}s", "FAKETIME_DONT_FAKE_MONOTONIC=1", f"LD_PRELOAD={FAKETIME_LIBRARY}"]
            if clock_ahead_s
            else []
        )
        self.agents[agent_id] = self._spawn(
            self.hosts[agent_id],
            agent_id,
            [
                *faked,
                program("loadfleet-agent"),
                "--controller",
                self.address,
                "--id",
                agent_id,
                "--cores",
                "1",
                "--spool-dir",
                str(self.tmp / "spool" / agent_id),
                *self.pki.client_args("agent", agent_id),
                "--allow-targets",
                str(self.net.subnet),
            ],
        )
        return self.agents[agent_id]

    def kill_agent(self, agent_id: str) -> None:
        """The agent's host dies: the agent and its engines are killed at once."""
        agent = psutil.Process(self.agents[agent_id].pid)
        for proc in [agent, *agent.children(recursive=True)]:
            proc.send_signal(signal.SIGKILL)
        self.agents[agent_id].wait(10)

    def _spawn(self, host, name: str, argv: list[str]) -> subprocess.Popen:
        proc = host.spawn(argv, log=self.tmp / f"{name}.log")
        self.leftovers.pids.append(proc.pid)
        return proc

    def loadfleet(
        self, *args: str, timeout: float = 60, host=None, as_operator: bool = True
    ) -> subprocess.CompletedProcess:
        credentials = self.pki.client_args("operator", OPERATOR) if as_operator else ()
        return (host or self.ctrl).run(
            [program("loadfleet"), *args, "--controller", self.address, *credentials], timeout=timeout
        )

    def connected_agents(self) -> set[str]:
        result = self.loadfleet("agents", "--json")
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        return {a["agentId"] for a in json.loads(result.stdout) if a.get("state", "").lower() != "lost"}

    def wait_for_agents(self, ids: set[str], timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not ids <= self.connected_agents():
            assert time.monotonic() < deadline, f"agents {ids} did not connect: {self.connected_agents()}"
            time.sleep(0.2)

    def plan(
        self,
        duration_s: float | None,
        *,
        name: str = "netns",
        load: dict | None = None,
        agents: dict | None = None,
        **fields,
    ) -> Path:
        """A plan for both web servers; `duration_s` None for a sweep (`fields` has it)."""
        if duration_s is not None:
            fields["duration_s"] = duration_s
        return write_plan(
            self.tmp / f"plan-{name}.yaml",
            name=name,
            targets=[{"url": web.url} for web in self.webs],
            workload={"keep_alive": True, "manifest": str(self.docroot / "manifest.json")},
            load=load or {"model": "closed", "clients": 8},
            agents={"wait_s": 20, **(agents or {})},
            **fields,
        )

    def start_run(self, plan: Path) -> subprocess.Popen:
        return subprocess.Popen(
            self.ctrl.argv(
                [
                    program("loadfleet"),
                    "run",
                    str(plan),
                    "--controller",
                    self.address,
                    "--json",
                    *self.pki.client_args("operator", OPERATOR),
                ]
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def engine_pids(self, agent_id: str) -> list[int]:
        agent = psutil.Process(self.agents[agent_id].pid)
        return [c.pid for c in agent.children(recursive=True) if c.name() == "loadfleet-engine"]

    def wait_for_engines(self, agent_id: str, timeout_s: float = 20) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while not (engines := self.engine_pids(agent_id)):
            assert time.monotonic() < deadline, f"{agent_id} started no engine"
            time.sleep(0.1)
        self.leftovers.pids += engines
        return engines

    def logs(self) -> str:
        """The tails of the controller's and agents' logs, for failure messages."""
        return "".join(
            f"\n--- {name}.log\n" + (self.tmp / f"{name}.log").read_text()[-1500:]
            for name in ("controller", *self.agents)
        )

    def served(self) -> int:
        return sum(web.access_log_lines() for web in self.webs)

    def stop(self) -> None:
        """Notes every process and child for `Leftovers`; the network stops them."""
        for proc in [self.controller, self.monitor, *self.agents.values()]:
            with contextlib.suppress(psutil.NoSuchProcess, AttributeError):
                self.leftovers.pids += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]


def finish(run: subprocess.Popen, timeout_s: float = 60) -> tuple[int, dict | None, str]:
    out, err = run.communicate(timeout=timeout_s)
    assert "Traceback" not in err, err
    return run.returncode, json.loads(out) if out.strip() else None, err
