"""Making a run's appended files durable (fsync) without the event loop waiting for the disk.

A flush hands what is written to the OS: it survives the controller dying. At each
checkpoint the run's files are also made to survive the host crashing (fsync), and fsync
waits for the disk: a run of 1,000 agents appends ~6 MB to intervals.csv between two
checkpoints, and on a busy disk that can take seconds, during which the loop that answers
every agent's heartbeats would stand still (its leases are 3 s). So the files' descriptors
are duplicated on the loop (a file closed meanwhile stays valid to sync) and synced in a
worker thread; a sync that fails cuts its file back like a failed write (rundisk.py), on the
loop. A host crash while a sync runs may leave a file shorter than the checkpoint says; a
controller that takes the run over then leaves that file as it is, incomplete.

Bound: one sync running and one waiting. Requests made while a sync runs are merged into the
waiting one (a file's newest descriptor), so a disk slower than the checkpoints costs at most
one descriptor per file, never a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable

from .rundisk import AppendFile

log = logging.getLogger(__name__)

# A sync slower than this is logged: the disk is what would have stalled the run.
SLOW_SYNC_S = 1.0


class Syncer:
    """Makes AppendFiles durable in a worker thread (at once when no event loop runs)."""

    def __init__(self, *, fsync: Callable[[int], None] = os.fsync, slow_s: float = SLOW_SYNC_S):
        self._fsync = fsync
        self._slow_s = slow_s
        self._waiting: dict[AppendFile, int] = {}  # file -> a duplicate of its descriptor
        self._task: asyncio.Task | None = None

    def request(self, files: Iterable[AppendFile]) -> None:
        """`files` flushed and then made durable, without waiting for the disk when an
        event loop runs."""
        duplicates = {f: fd for f in files if (fd := f.duplicate_fd()) is not None}
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to keep responsive (a tool, a test): wait for the disk
            self._report(self._sync(duplicates))
            return
        for file in duplicates.keys() & self._waiting.keys():
            os.close(self._waiting[file])
        self._waiting.update(duplicates)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._work(), name="run-dir-sync")

    async def drained(self) -> None:
        """Returns once every sync requested so far is done."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _work(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                self._report(await asyncio.to_thread(self._sync, batch))  # the thread closes the batch's
        finally:  # cancelled with the loop: what waits is not synced, but its descriptors are closed
            for fd in self._waiting.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._waiting = {}

    def _sync(self, batch: dict[AppendFile, int]) -> list[tuple[AppendFile, OSError]]:
        """In the worker thread: fsync and close each duplicate; the failures."""
        failures = []
        started = time.monotonic()
        for file, fd in batch.items():
            try:
                self._fsync(fd)
            except OSError as exc:
                failures.append((file, exc))
            finally:
                with contextlib.suppress(OSError):
                    os.close(fd)
        took = time.monotonic() - started
        if took >= self._slow_s:
            names = ", ".join(sorted(f.path.name for f in batch))
            log.warning("the disk took %.1f s to make %s durable (fsync; the run did not wait for it)", took, names)
        return failures

    @staticmethod
    def _report(failures: list[tuple[AppendFile, OSError]]) -> None:
        for file, exc in failures:
            file.sync_failed(exc)
