"""One native engine process, spoken to over its stdio protocol (engine.proto).

The engine's lifetime is tied to its stdin: if the agent dies, the pipe closes and
the engine exits at once. `kill()` is for the cases where waiting is not allowed
(lease lost, agent shutting down).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from pathlib import Path

from loadfleet.v1 import engine_pb2, job_pb2
from loadfleet.wire.framing import FramingError, frame, read_frame

from .child import ChildProcess, start_child
from .errors import EngineError

ENGINE_ENV = "LOADFLEET_ENGINE"
ENGINE_PROGRAM = "loadfleet-engine"
READY_TIMEOUT_S = 10.0


def find_engine(explicit: str | None = None) -> str:
    """The engine program: --engine, then $LOADFLEET_ENGINE, then beside this
    interpreter (where pip puts the loadfleet-engine wheel's program in a virtualenv, and
    `make setup` a fresh build), then PATH (a system-wide or --user install)."""
    beside = Path(sys.executable).parent / ENGINE_PROGRAM
    candidate = (
        explicit or os.environ.get(ENGINE_ENV) or (str(beside) if beside.exists() else shutil.which(ENGINE_PROGRAM))
    )
    if not candidate or not os.access(candidate, os.X_OK):
        raise EngineError(
            f"cannot find the {ENGINE_PROGRAM} program (give --engine PATH, set "
            f"${ENGINE_ENV}, or install the loadfleet-engine wheel: `make dist`, docs/deploy.md)"
        )
    return candidate


class EngineProcess(ChildProcess):
    """One engine process; its pipes, tail, kill and wait are a ChildProcess's."""

    @classmethod
    async def spawn(cls, program: str) -> EngineProcess:
        """Starts `program` and waits for its `ready` event; EngineError when it does not come."""
        engine = cls(await start_child([program]), label="engine")
        try:
            event = await asyncio.wait_for(engine.next_event(), READY_TIMEOUT_S)
        except (TimeoutError, EngineError) as exc:
            event, problem = None, str(exc) or "timeout"
        else:
            problem = "" if event is not None and event.WhichOneof("event") == "ready" else "no ready event"
        if problem:
            engine.kill()
            await engine.wait()
            raise EngineError(f"{program} did not report ready ({problem}); stderr: {engine.stderr_tail()}")
        return engine

    async def start(self, spec: job_pb2.JobSpec) -> None:
        await self._send(engine_pb2.EngineCommand(start=spec))

    async def adjust(self, load: job_pb2.LoadShare, max_requests: int) -> None:
        """A new share, effective at once; `max_requests` (0: unchanged) the whole budget."""
        with contextlib.suppress(EngineError):
            await self._send(engine_pb2.EngineCommand(adjust=load))
            if max_requests:
                await self._send(engine_pb2.EngineCommand(budget=engine_pb2.EngineBudget(max_requests=max_requests)))

    async def adjust_scenario(self, scenario: int, load: job_pb2.LoadShare, max_requests: int) -> None:
        """A new share of one scenario of the job (its position in JobSpec.scenarios)."""
        adjust = engine_pb2.ScenarioAdjust(scenario=scenario, load=load, max_requests=max_requests)
        with contextlib.suppress(EngineError):
            await self._send(engine_pb2.EngineCommand(scenario_adjust=adjust))

    async def append_rows(self, blocks: list[job_pb2.FeedBlock]) -> None:
        """Rows of the job's unique feed handed to this engine, taken after its own."""
        with contextlib.suppress(EngineError):
            await self._send(engine_pb2.EngineCommand(feed_append=engine_pb2.FeedAppend(blocks=blocks)))

    async def stop(self) -> None:
        """Graceful: in-flight requests finish, the partial interval is reported."""
        with contextlib.suppress(EngineError):
            await self._send(engine_pb2.EngineCommand(stop=engine_pb2.EngineStop()))

    async def next_event(self) -> engine_pb2.EngineEvent | None:
        """The next event, or None when the engine closed its stdout."""
        try:
            payload = await read_frame(self._stdout)
        except FramingError as exc:
            raise EngineError(f"engine {self.pid} broke the stdio protocol: {exc}") from exc
        return None if payload is None else engine_pb2.EngineEvent.FromString(payload)

    async def _send(self, command: engine_pb2.EngineCommand) -> None:
        try:
            self._stdin.write(frame(command.SerializeToString()))
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise EngineError(f"engine {self.pid} is gone") from exc
