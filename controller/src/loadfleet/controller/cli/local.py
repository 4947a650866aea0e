"""`loadfleet run --local N`: an in-process controller and N agent processes on this
machine, so that one command runs a plan with nothing else started by hand.

The agents are the real `loadfleet-agent` program talking real gRPC to the
in-process controller, the same path as a distributed run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from loadfleet.controller.fleet.agents import AgentState
from loadfleet.controller.model.errors import NotEnoughAgents, UsageError
from loadfleet.controller.rpc.server import ControllerServer
from loadfleet.controller.service.controller import Controller

AGENT_START_TIMEOUT_S = 30.0
AGENT_STOP_TIMEOUT_S = 5.0


def agent_program() -> str:
    """loadfleet-agent beside this interpreter (same venv), else on PATH."""
    beside = Path(sys.executable).parent / "loadfleet-agent"
    path = str(beside) if beside.exists() else shutil.which("loadfleet-agent")
    if path is None:
        raise UsageError("--local needs the loadfleet-agent program on PATH (pip install ./agent)")
    return path


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (`taskset`, a container's cpuset), which
    its agents inherit; the machine's count where the system cannot say (not Linux)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def engines_per_agent(n_agents: int, cpus: int) -> int:
    """The engines each of `n_agents` local agents runs: the `cpus` shared among them, at
    least 1 each. More engines than CPUs would wait for each other's turn on a core, and
    every interval would be judged generator-bound (engine wait)."""
    return max(1, cpus // max(1, n_agents))


@contextlib.asynccontextmanager
async def local_cluster(
    n_agents: int, controller: Controller, *, monitor: tuple[str, ...] = (), targets: tuple[str, ...] = ()
) -> AsyncIterator[str]:
    """Serves `controller` on loopback and starts the agents; yields the controller address.
    With `monitor` (process names), one more agent reports this host as serving `targets`."""
    if n_agents < 1:
        raise UsageError("--local needs at least 1 agent")
    program = agent_program()
    server = ControllerServer(controller, "127.0.0.1:0")
    await server.start()
    cores = engines_per_agent(n_agents, usable_cpus())
    # Local agents come and go with the command: their spools live only as long.
    spool_root = Path(tempfile.mkdtemp(prefix="loadfleet-local-spool-"))
    agents: list[subprocess.Popen[bytes]] = []

    def start_agent(agent_id: str, *options: str) -> None:
        argv = [program, "--controller", server.address, "--id", agent_id, "--log-level", "warning", *options]
        argv += ["--spool-dir", str(spool_root / agent_id)]
        agents.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True))

    try:
        for i in range(n_agents):
            start_agent(f"local-{i + 1}", "--cores", str(cores))
        if monitor:
            start_agent(
                "local-host",
                "--monitor",
                "--interfaces",
                "lo",
                *(f"--target={url}" for url in targets),
                *(f"--process={name}" for name in monitor),
            )
        await _wait_for_agents(server.controller, agents, len(agents))
        yield server.address
    finally:
        await asyncio.to_thread(_stop_agents, agents)
        await server.stop()
        shutil.rmtree(spool_root, ignore_errors=True)


async def _wait_for_agents(controller: Controller, agents: list[subprocess.Popen[bytes]], n: int) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + AGENT_START_TIMEOUT_S
    while True:
        idle = [r for r in controller.registry.all() if r.state is AgentState.IDLE]
        if len(idle) >= n:
            return
        dead = [p for p in agents if p.poll() is not None]
        if dead:
            raise NotEnoughAgents(f"local agent exited with status {dead[0].returncode} before connecting")
        if loop.time() > deadline:
            raise NotEnoughAgents(f"only {len(idle)} of {n} local agents connected within {AGENT_START_TIMEOUT_S:g} s")
        await controller.registry.wait_changed(0.2)


def _stop_agents(agents: list[subprocess.Popen[bytes]]) -> None:
    for proc in agents:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in agents:
        try:
            proc.wait(AGENT_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
