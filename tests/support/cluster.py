"""A real cluster for end-to-end tests: a controller process and agent processes,
as on separate hosts, started and stopped by PID (through `Processes`)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import yaml

from loadfleet.targets.nginx import NginxServer
from support.procs import free_port, program, wait_for_port


@dataclass
class Web:
    url: str
    server: NginxServer


class Cluster:
    """A controller and agents as separate processes, as on real hosts. `controller_args`
    go to the controller (e.g. its TLS files), `client_args` to every `loadfleet` command
    (an operator's credentials); `runs_dir` is the controller's (default: tmp_path/runs)."""

    def __init__(
        self,
        processes,
        tmp_path: Path,
        *,
        controller_args: tuple[str, ...] = (),
        client_args: tuple[str, ...] = (),
        runs_dir: Path | None = None,
    ):
        self.processes = processes
        self.tmp_path = tmp_path
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.runs_dir = runs_dir or tmp_path / "runs"
        self.client_args = tuple(client_args)
        self.controller_args = tuple(controller_args)
        self.controllers = 0
        self.controller = self.start_controller()
        self.agents: dict[str, subprocess.Popen] = {}

    def start_controller(self) -> subprocess.Popen:
        """A controller process on the cluster's address (again, after one died)."""
        self.controllers += 1
        name = "controller" if self.controllers == 1 else f"controller-{self.controllers}"
        self.controller = self.processes.start(
            name,
            [
                program("loadfleet"),
                "--log-level",
                "info",
                "controller",
                "--listen",
                self.address,
                "--runs-dir",
                str(self.runs_dir),
                *self.controller_args,
            ],
        )
        wait_for_port("127.0.0.1", self.port)
        return self.controller

    def add_agent(
        self, agent_id: str | None, cores: int = 1, *options: str, name: str | None = None
    ) -> subprocess.Popen:
        """An agent process; `agent_id` None: the agent takes its id from its credentials."""
        name = name or agent_id
        identity = ["--id", agent_id] if agent_id else []
        self.agents[name] = self.processes.start(
            name,
            [
                program("loadfleet-agent"),
                "--controller",
                self.address,
                *identity,
                "--cores",
                str(cores),
                "--spool-dir",
                str(self.tmp_path / "spool" / name),
                *options,
            ],
        )
        return self.agents[name]

    def wait_for_agents(self, n: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.loadfleet("agents", "--json")
            if result.returncode == 0 and len(json.loads(result.stdout)) >= n:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} agents did not connect: {result.stdout} {result.stderr}")
            time.sleep(0.2)

    def loadfleet(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [program("loadfleet"), *args, "--controller", self.address, *self.client_args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_run(self, plan: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [program("loadfleet"), "run", str(plan), "--controller", self.address, "--json", *self.client_args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def engine_pids(self, agent_id: str) -> list[int]:
        agent = psutil.Process(self.agents[agent_id].pid)
        return [c.pid for c in agent.children(recursive=True) if c.name() == "loadfleet-engine"]


def write_plan(path: Path, **fields) -> Path:
    path.write_text(yaml.safe_dump(fields))
    return path
