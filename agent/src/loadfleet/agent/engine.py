"""One native engine process, spoken to over its stdio protocol (engine.proto).

The engine's lifetime is tied to its stdin: if the agent dies, the pipe closes and
the engine exits at once. `kill()` is for the cases where waiting is not allowed
(lease lost, agent shutting down).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import sys
from pathlib import Path

from loadfleet.v1 import engine_pb2, job_pb2
from loadfleet.wire.framing import FramingError, frame, read_frame

from .errors import EngineError

log = logging.getLogger(__name__)

ENGINE_ENV = "LOADFLEET_ENGINE"
ENGINE_PROGRAM = "loadfleet-engine"
READY_TIMEOUT_S = 10.0
STDERR_TAIL_LINES = 20
# Engine frames can be large (many request names); the default 64 KiB limit is too small.
STREAM_LIMIT_BYTES = 16 * 2**20


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


class EngineProcess:
    def __init__(self, proc: asyncio.subprocess.Process):
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None, (
            "spawn() opens all three pipes"
        )
        self._proc = proc
        self._stdin, self._stdout, self._stderr = proc.stdin, proc.stdout, proc.stderr
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task = asyncio.create_task(self._drain_stderr(), name=f"engine-{proc.pid}-stderr")

    @classmethod
    async def spawn(cls, program: str) -> EngineProcess:
        try:
            proc = await asyncio.create_subprocess_exec(
                program,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=STREAM_LIMIT_BYTES,
            )
        except OSError as exc:
            raise EngineError(f"cannot start {program}: {exc.strerror}") from exc
        engine = cls(proc)
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

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def start(self, spec: job_pb2.JobSpec) -> None:
        await self._send(engine_pb2.EngineCommand(start=spec))

    async def adjust(self, load: job_pb2.LoadShare, max_requests: int) -> None:
        """A new share, effective at once; `max_requests` (0: unchanged) the whole budget."""
        with contextlib.suppress(EngineError):
            await self._send(engine_pb2.EngineCommand(adjust=load))
            if max_requests:
                await self._send(engine_pb2.EngineCommand(budget=engine_pb2.EngineBudget(max_requests=max_requests)))

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

    def kill(self) -> None:
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    async def wait(self) -> int:
        code = await self._proc.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self._stderr_task
        return code

    def stderr_tail(self) -> str:
        return " | ".join(self._stderr_tail)

    async def _send(self, command: engine_pb2.EngineCommand) -> None:
        try:
            self._stdin.write(frame(command.SerializeToString()))
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise EngineError(f"engine {self.pid} is gone") from exc

    async def _drain_stderr(self) -> None:
        async for line in self._stderr:
            text = line.decode(errors="replace").rstrip()
            self._stderr_tail.append(text)
            log.debug("engine %d: %s", self.pid, text)
