"""What a job runs: native engines (one per core) or one Gatling JVM.

Every driver speaks in EngineEvents (ready, one interval per interval, final interval,
finished or failed), so the job follows and merges all of them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from loadfleet.v1 import engine_pb2, job_pb2

from .engine import EngineProcess
from .gatling import GatlingProcess, find_gatling, jvm_job
from .gatling_project import build_project
from .guard import LoadPolicy


class Driver(Protocol):
    """A running load generator. `stop()` is graceful (in-flight requests finish and the
    partial interval is reported); `kill()` ends load at once; `next_event()` is None at the end."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def start(self, spec: job_pb2.JobSpec) -> None: ...

    async def stop(self) -> None: ...

    async def next_event(self) -> engine_pb2.EngineEvent | None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...

    def stderr_tail(self) -> str: ...


@runtime_checkable
class Adjustable(Protocol):
    """An optional ability: a new share while running (the engine has it, a Gatling JVM not)."""

    async def adjust(self, load: job_pb2.LoadShare, max_requests: int) -> None: ...

    async def adjust_scenario(self, scenario: int, load: job_pb2.LoadShare, max_requests: int) -> None: ...

    async def append_rows(self, blocks: list[job_pb2.FeedBlock]) -> None: ...


@runtime_checkable
class Announcing(Protocol):
    """An optional ability: its own line for the job's ready state (a Gatling JVM's start-up)."""

    def ready_message(self) -> str: ...


@runtime_checkable
class ArtifactSource(Protocol):
    """An optional ability: files for the run directory, as (plain name, bytes), once ended."""

    def artifacts(self) -> list[tuple[str, bytes]]: ...


def is_gatling(spec: job_pb2.JobSpec) -> bool:
    return spec.driver == job_pb2.DRIVER_GATLING


async def launch_drivers(
    job_spec: job_pb2.JobSpec,
    engine_specs: list[job_pb2.JobSpec],
    engine_program: str,
    started: Callable[[Driver], None],
    policy: LoadPolicy = LoadPolicy(),
) -> None:
    """Starts the job's drivers, handing each to `started` as soon as it runs (so that a
    failure half-way leaves nothing the caller cannot kill). Gatling gets the agent's whole
    share in one JVM (it uses every core itself); engines get one share each.
    Raises EngineError when a driver cannot start, JobRefused (before starting anything)
    when `policy` does not allow the job; drivers get the addresses the policy checked."""
    job_spec, engine_specs = await policy.confine(job_spec, engine_specs)
    if is_gatling(job_spec):
        install = find_gatling()
        spec = jvm_job(job_spec, engine_specs)  # with scenarios, the agent's share of each
        project = spec.gatling.project
        # A user's project is compiled first (once per content), then runs like JobSimulation.
        build = await build_project(Path(project), install.hook_classes) if project else None
        gatling = await GatlingProcess.spawn(install, spec, build)
        started(gatling)
        await gatling.wait_ready()
        return
    for spec in engine_specs:
        engine = await EngineProcess.spawn(engine_program)
        started(engine)
        await engine.start(spec)


__all__ = ["Announcing", "ArtifactSource", "Driver", "is_gatling", "launch_drivers"]
