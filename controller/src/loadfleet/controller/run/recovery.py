"""Runs a controller left behind when it died, read back from their journals.

On start the controller looks for run directories with a journal but no summary.json.
A run whose journal was written to recently enough that its agents may still be running
their jobs (within their lease, `adoptable`) is taken over: the restarted controller
claims the jobs when the agents reconnect (Welcome.adopted_jobs), they send again what it
has not acknowledged, and the run goes on. Any other is closed as interrupted: its
summary is written from the journal, and the run directory keeps every interval
published before the crash.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loadfleet.controller.analysis.progress import RunProgress
from loadfleet.controller.fleet.jobs import JobState
from loadfleet.controller.fleet.losses import Loss
from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.output.rundir import EVENTS_FILE, SUMMARY_FILE, Offsets
from loadfleet.controller.run.journal import JournalContents, LoggedInterval, has_journal, read_journal
from loadfleet.controller.run.records import (
    FileIncomplete,
    JobEnded,
    KneeRecorded,
    RunStarted,
    ShareLost,
    StepEnded,
    StepHalted,
    StepsSkipped,
    StepStarted,
    StopDecided,
)
from loadfleet.controller.stream.contract import StepWindow
from loadfleet.wire import DEFAULT_INTERVAL_MS

log = logging.getLogger(__name__)

# Beyond the agents' lease, how long after its journal's last write a run may still be
# taken over: the lease counts from the last message an agent heard, which may be a
# little after the last interval the controller wrote.
ADOPT_SLACK_S = 5.0


@dataclass
class RecoveredStep:
    window: StepWindow
    engines: dict[str, int]  # agent -> engines running its share
    ended: dict[str, JobState]  # agent -> the state its job ended in
    shares: dict[str, tuple[EngineShare, ...]] = field(default_factory=dict)  # as of its last loss
    losses: list[Loss] = field(default_factory=list)


@dataclass
class Recovered:
    """What a journal says of a run: how far it got (for the run that takes it over), the
    step that was running, and how far its files are good (for its pipeline)."""

    run_dir: Path
    progress: RunProgress
    step: RecoveredStep | None  # the step that was running, if any
    checkpoint: dict[str, Any] | None
    intervals: list[LoggedInterval]
    offsets: Offsets
    watermark_ms: int  # every interval before this one was published
    events: list[Event] = field(default_factory=list)
    incomplete_files: list[str] = field(default_factory=list)  # left as they are, written no more
    modified_s: float = 0.0

    @property
    def step_windows(self) -> dict[str, StepWindow]:
        return {self.step.window.name: self.step.window} if self.step else {}


def interrupted_runs(runs_dir: Path) -> list[Path]:
    """Run directories with a journal and no summary: runs whose controller died."""
    if not runs_dir.is_dir():
        return []
    return sorted(d for d in runs_dir.iterdir() if has_journal(d) and not (d / SUMMARY_FILE).exists())


def recover(run_dir: Path) -> Recovered:
    """A run's journal read back (ValueError when it is not one a run could write)."""
    contents = read_journal(run_dir)
    start = contents.first(RunStarted)
    if start is None:
        raise ValueError(f"{run_dir}: the journal has no run record")
    results = [r.result for r in contents.of_kind(StepEnded)]
    ended_names = {r.name for r in results}
    steps = [r for r in contents.of_kind(StepStarted) if r.window.name not in ended_names]
    step = _running_step(contents, steps[-1]) if steps else None
    offsets, watermark = _written(contents)
    progress = RunProgress(
        agents=list(start.agents),
        hostnames=set(start.hostnames),
        clock_offsets_ms=dict(start.clock_offsets_ms),
        results=results,
        knees={r.servers: r.knee for r in contents.of_kind(KneeRecorded)},
        skipped=[name for r in contents.of_kind(StepsSkipped) for name in r.steps],
        stop=next((r.reason for r in contents.of_kind(StopDecided)), None),
        losses=[r.loss for r in contents.of_kind(ShareLost)],
        late=dict(contents.checkpoint.get("late", {})) if contents.checkpoint else {},
    )
    return Recovered(
        run_dir=run_dir,
        progress=progress,
        incomplete_files=[r.file for r in contents.of_kind(FileIncomplete)],
        step=step,
        checkpoint=contents.checkpoint,
        intervals=contents.intervals,
        offsets=offsets,
        watermark_ms=watermark,
        events=_events(run_dir),
        modified_s=contents.modified_s,
    )


def adoptable(recovered: Recovered, lease_s: float, now_s: float | None = None) -> bool:
    """Whether its agents may still be running their jobs: the journal was written within
    their lease (and a little slack)."""
    now_s = time.time() if now_s is None else now_s
    return recovered.step is not None and now_s - recovered.modified_s <= lease_s + ADOPT_SLACK_S


def _running_step(contents: JournalContents, started: StepStarted) -> RecoveredStep:
    window = started.window
    halts = [r for r in contents.of_kind(StepHalted) if r.step == window.name]
    if halts:
        window = replace(window, load_end_ms=halts[-1].load_end_ms, cooldown_ms=0, stopped=True)
    ended = {r.agent: r.state for r in contents.of_kind(JobEnded) if r.step == window.name}
    shares = dict(started.shares)
    losses = [r for r in contents.of_kind(ShareLost) if r.loss.step == window.name]
    for r in losses:
        shares.update(r.shares)
    return RecoveredStep(window, dict(started.engines), ended, shares, [r.loss for r in losses])


def _written(contents: JournalContents) -> tuple[Offsets, int]:
    """How far the run directory's files are good, and the first interval not published."""
    if contents.intervals:
        last = contents.intervals[-1]
        step = next((r.window for r in contents.of_kind(StepStarted) if r.window.name == last.step), None)
        return last.offsets, last.start_ms + (step.interval_ms if step else DEFAULT_INTERVAL_MS)
    if contents.checkpoint:
        return Offsets(**contents.checkpoint["offsets"]), contents.checkpoint["watermark_ms"]
    return Offsets(), 0


def _events(run_dir: Path) -> list[Event]:
    events = []
    path = run_dir / EVENTS_FILE
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                doc = json.loads(line)
                events.append(Event(EventKind(doc["kind"]), doc["text"], doc.get("agent_id", ""), doc["at_ms"]))
            except (ValueError, KeyError):
                break  # a line cut short by the crash
    return events
