"""Following a run (`loadfleet run`, `loadfleet status`): its progress lines as they come, then
its summary, the files a CI system reads (--junit, --markdown), and the exit code the summary
calls for. The first Ctrl-C asks the controller to stop the run."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from loadfleet.controller.model.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_STOPPED_BY_CONDITION,
    EXIT_THRESHOLD_FAILED,
    ControllerSilent,
    ControllerUnreachable,
    LoadfleetError,
    UsageError,
)
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.output import console
from loadfleet.controller.output.junit import run_junit
from loadfleet.controller.output.markdown import run_markdown
from loadfleet.controller.output.watchers import KEPT_EVENTS
from loadfleet.v1 import run_pb2

from .client import RunClient
from .options import CiOutputs

# A run that ended in one of these states exits 1.
_FAILED_STATES = (run_pb2.RUN_STATE_FAILED,)


async def follow(client: RunClient, run_id: str, as_json: bool, outputs: CiOutputs = CiOutputs()) -> int:
    """Prints a run's progress until it ends, then its summary; writes `outputs` (whatever the
    verdict); returns the exit code."""
    summary = await _watch(client, run_id, sys.stderr if as_json else sys.stdout)
    doc = json.loads(summary.summary_json) if summary.summary_json else {}
    read = SummaryDoc.of(doc)
    if as_json:
        print(summary.summary_json)
    else:
        _print_tables(summary, doc, read)
    run_failed = summary.state in _FAILED_STATES
    code = exit_code_of(read, run_failed=run_failed)
    write_ci_outputs(outputs, read, run_failed=run_failed, exit_code=code, run_dir=summary.run_dir)
    return code


def exit_code_of(read: SummaryDoc, *, run_failed: bool) -> int:
    """The exit code a run's summary calls for: the first of 1 > 4 > 3 > 0 that applies."""
    if run_failed or read.incomplete_files:
        return EXIT_RUN_FAILED  # a full disk left results out: scripts must not take them as whole
    if read.verdict and not read.verdict.passed:
        return EXIT_THRESHOLD_FAILED  # a threshold failed, or no response was ok
    return EXIT_STOPPED_BY_CONDITION if read.stop else EXIT_OK


def write_ci_outputs(outputs: CiOutputs, read: SummaryDoc, *, run_failed: bool, exit_code: int, run_dir: str) -> None:
    """The JUnit and Markdown files, each whole or not at all; a file that cannot be written
    after all (its folder gone, a full disk) is a UsageError naming it, once both were tried."""
    texts = {}
    if outputs.junit is not None:
        texts["--junit", outputs.junit] = run_junit(read, run_failed=run_failed)
    if outputs.markdown is not None:
        texts["--markdown", outputs.markdown] = run_markdown(read, exit_code=exit_code, run_dir=run_dir)
    problems = []
    for (flag, path), text in texts.items():
        try:
            _write_atomic(path, text)
        except OSError as exc:
            problems.append(f"{flag} {path}: cannot write it: {exc.strerror or exc}")
    if problems:
        raise UsageError("; ".join(problems))


def _write_atomic(path: Path, text: str) -> None:
    """Writes a temporary file beside `path`, then renames it: a reader (a CI step, a watcher)
    sees the old file or the whole new one, never half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


# A watch cut off (the controller restarted, or its connection was reset) is followed again
# this many times, after these pauses, before `loadfleet run` gives up: the run goes on on the
# controller either way. A controller silent past the keepalive is not: it is said at once.
REFOLLOW_PAUSES_S = (1.0, 2.0, 4.0)


async def _watch(client: RunClient, run_id: str, progress: TextIO) -> run_pb2.RunSummary:
    """Prints the run's progress lines until it ends; returns its summary. A watch cut off is
    followed again (REFOLLOW_PAUSES_S); the events it replays are not printed twice."""
    printed = _Printed()
    stopping = _stop_on_interrupt(client, run_id)
    try:
        print(console.PROGRESS_HEADER, file=progress, flush=True)
        for pause_s in (*REFOLLOW_PAUSES_S, None):
            try:
                summary = await _follow_once(client, run_id, progress, printed)
                break
            except ControllerUnreachable as exc:
                if pause_s is None or isinstance(exc, ControllerSilent):  # silent: it would wait as long again
                    raise ControllerUnreachable(
                        f"{exc}; run {run_id} may still be going: `loadfleet status {run_id}` follows it again"
                    ) from None
                print(f"loadfleet: {exc}; following run {run_id} again in {pause_s:g} s", file=sys.stderr, flush=True)
                await asyncio.sleep(pause_s)
    finally:
        stopping()
    if summary is None:
        raise LoadfleetError("the controller ended the run without a summary")
    return summary


class _Printed:
    """The events printed, as a watch replays them when followed again: the run's first and last
    KEPT_EVENTS (output/watchers.py). So this holds as many keys, whatever the run's length."""

    def __init__(self) -> None:
        self._first: set[tuple[int, int, str]] = set()
        self._recent: collections.deque[tuple[int, int, str]] = collections.deque(maxlen=KEPT_EVENTS)

    def new(self, event: run_pb2.RunEvent) -> bool:
        """Whether `event` was not printed yet; it counts as printed from now on."""
        key = (event.at_ms, event.kind, event.text)
        if key in self._first or key in self._recent:
            return False
        if len(self._first) < KEPT_EVENTS:
            self._first.add(key)
        else:
            self._recent.append(key)
        return True


async def _follow_once(
    client: RunClient, run_id: str, progress: TextIO, printed: _Printed
) -> run_pb2.RunSummary | None:
    """One watch of the run, to its summary (None: the watch ended without one)."""
    async for update in client.watch(run_id):
        kind = update.WhichOneof("update")
        if kind == "interval":
            print(console.progress_line(update.interval), file=progress, flush=True)
            for line in console.scenario_lines(update.interval):
                print(line, file=progress, flush=True)
        elif kind == "event":
            if printed.new(update.event):
                print(console.event_line(update.event), file=progress, flush=True)
        else:
            return update.finished
    return None


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
