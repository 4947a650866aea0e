"""Following a run (`loadfleet run`, `loadfleet status`): its progress lines as they come, then
its summary, and the exit code the summary calls for. The first Ctrl-C asks the controller to
stop the run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Callable
from typing import Any, TextIO

from loadfleet.controller.model.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_STOPPED_BY_CONDITION,
    EXIT_THRESHOLD_FAILED,
    ControllerUnreachable,
    LoadfleetError,
)
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.output import console
from loadfleet.v1 import run_pb2

from .client import RunClient

# A run that ended in one of these states exits 1.
_FAILED_STATES = (run_pb2.RUN_STATE_FAILED,)


async def follow(client: RunClient, run_id: str, as_json: bool) -> int:
    """Prints a run's progress until it ends, then its summary; returns the exit code."""
    summary = await _watch(client, run_id, sys.stderr if as_json else sys.stdout)
    doc = json.loads(summary.summary_json) if summary.summary_json else {}
    read = SummaryDoc.of(doc)
    if as_json:
        print(summary.summary_json)
    else:
        _print_tables(summary, doc, read)
    if summary.state in _FAILED_STATES or read.incomplete_files:
        return EXIT_RUN_FAILED  # a full disk left results out: scripts must not take them as whole
    if read.verdict and not read.verdict.passed:
        return EXIT_THRESHOLD_FAILED  # a threshold failed, or no response was ok
    return EXIT_STOPPED_BY_CONDITION if read.stop else EXIT_OK


async def _watch(client: RunClient, run_id: str, progress: TextIO) -> run_pb2.RunSummary:
    """Prints the run's progress lines until it ends; returns its summary."""
    summary = None
    stopping = _stop_on_interrupt(client, run_id)
    try:
        print(console.PROGRESS_HEADER, file=progress, flush=True)
        async for update in client.watch(run_id):
            kind = update.WhichOneof("update")
            if kind == "interval":
                print(console.progress_line(update.interval), file=progress, flush=True)
            elif kind == "event":
                print(console.event_line(update.event), file=progress, flush=True)
            else:
                summary = update.finished
    except ControllerUnreachable as exc:
        raise ControllerUnreachable(
            f"{exc}; run {run_id} may still be going: `loadfleet status {run_id}` follows it again"
        ) from None
    finally:
        stopping()
    if summary is None:
        raise LoadfleetError("the controller ended the run without a summary")
    return summary


def _print_tables(summary: run_pb2.RunSummary, doc: dict[str, Any], read: SummaryDoc) -> None:
    print(console.summary_table(summary, doc))
    if phases := console.phases_table(doc):
        print(phases)
    if len(read.steps) > 1:
        print(console.steps_table(doc))
    if read.hosts:
        print(console.hosts_table(doc))


def _stop_on_interrupt(client: RunClient, run_id: str) -> Callable[[], object]:
    """The first Ctrl-C asks the controller to stop the run (results are still written)."""
    loop = asyncio.get_running_loop()
    requests: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to its tasks

    def request_stop() -> None:
        print("\nloadfleet: stopping the run (Ctrl-C again to quit at once)", file=sys.stderr)
        loop.remove_signal_handler(signal.SIGINT)
        task = loop.create_task(client.stop_run(run_id), name=f"stop run {run_id}")
        requests.add(task)
        task.add_done_callback(requests.discard)

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, request_stop)
    return lambda: loop.remove_signal_handler(signal.SIGINT)
