"""A program the agent drives over its stdio (a native engine, a Gatling JVM).

`start_child` starts it with its three pipes; `ChildProcess` is what every driver does with
it alike: drains its stderr into a bounded tail of lines for error messages, kills it at once
when waiting is not allowed (lease lost, agent shutting down), waits for it. What a driver
says to its child and reads from it stays in its own module (engine.py, gatling.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Sequence

from .errors import EngineError

log = logging.getLogger(__name__)

# A child's frames and lines can be large (many request names); asyncio's default 64 KiB
# limit is too small.
STREAM_LIMIT_BYTES = 16 * 2**20
TAIL_LINES = 20


async def start_child(argv: Sequence[str]) -> asyncio.subprocess.Process:
    """`argv` started with stdin, stdout and stderr piped; EngineError when it cannot start."""
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=STREAM_LIMIT_BYTES,
        )
    except OSError as exc:
        raise EngineError(f"cannot start {argv[0]}: {exc.strerror}") from exc


class ChildProcess:
    """A child from `start_child`, known in logs as `label` and its PID. Its tail holds the
    last TAIL_LINES non-blank lines of its stderr and of whatever else a driver `remember`s."""

    def __init__(self, proc: asyncio.subprocess.Process, *, label: str):
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None, (
            "start_child() opens all three pipes"
        )
        self._proc = proc
        self._stdin, self._stdout, self._stderr = proc.stdin, proc.stdout, proc.stderr
        self._label = label
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._stderr_task = asyncio.create_task(self._drain_stderr(), name=f"{label}-{proc.pid}-stderr")

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def kill(self) -> None:
        """Ends the child at once; nothing when it has ended already. Safe to call twice."""
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    async def wait(self) -> int:
        """Its exit status, once it has ended and its stderr has been read to the end."""
        code = await self._proc.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self._stderr_task
        return code

    def stderr_tail(self) -> str:
        return " | ".join(self._tail)

    def remember(self, line: str) -> None:
        """Keeps `line` in the tail (and the debug log), unless it is blank."""
        if line.strip():
            self._tail.append(line)
            log.debug("%s %d: %s", self._label, self.pid, line)

    async def _drain_stderr(self) -> None:
        async for line in self._stderr:
            self.remember(line.decode(errors="replace").rstrip())
