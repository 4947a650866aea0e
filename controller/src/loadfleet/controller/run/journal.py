"""The run's journal (`runs/<run-id>/journal/`): enough to take a run over after the
controller died, or to close it as interrupted with its summary.

- `run.jsonl`: one record (records.py) per change of the run's course (the run started, a step started
  with its agents, a step was stopped, an agent's job ended, a step ended with its figures,
  a knee, a stop condition, skipped steps), appended and flushed at once. O(steps + agents).
- `intervals.log`: each published interval since the last checkpoint (`JournalInterval`,
  journal.proto, in length-delimited frames: a thousand agents' totals a second cost no
  JSON): its cluster rows, each agent's total and how far intervals.csv and latency.hlog
  were written after it.
- `checkpoint.json`: the running totals (run, current step, drift baseline) as of an
  interval, written every `CHECKPOINT_INTERVALS` intervals and at each step's end; the
  interval log then starts over, so the journal stays O(agents) on disk too.

Records are JSON lines and frames; a line or frame cut short by a crash is ignored. Rows
travel as protobuf (in JSON as base64, codec.py), so histograms come back exact. A write that
fails (a full disk) stops the journal where it was complete and consistent (rundisk.py): the
run goes on; a controller restarted later takes the run over as of that point, without what
came after it.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from loadfleet.controller.model.codec import from_doc, to_doc
from loadfleet.controller.output.diskwriter import DiskWriter
from loadfleet.controller.output.rundir import Offsets, write_atomic
from loadfleet.controller.output.rundisk import AppendFile, DiskTrouble
from loadfleet.controller.run.records import JournalRecord
from loadfleet.controller.stream.contract import AgentRows, FinalInterval, StepWindow, scenario_totals_of
from loadfleet.v1 import journal_pb2
from loadfleet.wire.framing import FramingError, frame, parse_frames
from loadfleet.wire.stats import StatsRow

log = logging.getLogger(__name__)

R = TypeVar("R", bound=JournalRecord)

JOURNAL_DIR = "journal"
RECORDS_FILE = "run.jsonl"
INTERVALS_FILE = "intervals.log"
CHECKPOINT_FILE = "checkpoint.json"
# A checkpoint every this many intervals bounds what a recovery replays (and the log's size).
CHECKPOINT_INTERVALS = 30


class RunJournal:
    """Appends to a run's journal through `disk` (the run directory's: written in order with
    its files). Not thread-safe; the run's event loop owns it."""

    def __init__(self, run_dir: Path, trouble: DiskTrouble | None = None, disk: DiskWriter | None = None):
        self.directory = run_dir / JOURNAL_DIR
        self._trouble = trouble or DiskTrouble(run_dir)
        self._disk = disk or DiskWriter()
        self._trouble.attempt(JOURNAL_DIR, lambda: self.directory.mkdir(parents=True, exist_ok=True))
        self._records = _append(self.directory / RECORDS_FILE, self._trouble, self._disk)
        self._intervals = _append(self.directory / INTERVALS_FILE, self._trouble, self._disk)
        self._records.stop_with(self._intervals)
        self._closed = False
        self.intervals_since_checkpoint = 0
        self._stop_if_broken()

    @property
    def stopped(self) -> bool:
        """A write failed: the journal is what it was then, and is written no more."""
        return self._records.closed and self._intervals.closed

    def record(self, record: JournalRecord) -> None:
        self._records.write(json.dumps({"kind": record.KIND.value, **to_doc(record)}) + "\n")
        self._records.flush()
        self._stop_if_broken()

    def interval(self, interval: FinalInterval, offsets: Offsets) -> None:
        record = journal_pb2.JournalInterval(
            interval_start_ms=interval.start_ms,
            step=interval.step.name,
            intervals_csv_bytes=offsets.intervals,
            latency_hlog_bytes=offsets.hlog,
            cluster=[r.to_proto(buckets=True) for r in interval.cluster],
            agents=[
                journal_pb2.AgentTotal(agent_id=a.agent_id, total=a.total.to_proto(buckets=True))
                for a in interval.agents
            ],
            missing=interval.missing,
        )
        self._intervals.write(frame(record.SerializeToString()))
        self._intervals.flush()
        self.intervals_since_checkpoint += 1
        self._stop_if_broken()

    def checkpoint(self, state: dict[str, Any]) -> None:
        """Writes the running state (as of the last interval logged) and starts the interval
        log over; `state` is JSON values (see Checkpoint)."""
        self.intervals_since_checkpoint = 0
        if self.stopped:
            return
        text = json.dumps(state)
        name, path = f"{JOURNAL_DIR}/{CHECKPOINT_FILE}", self.directory / CHECKPOINT_FILE

        def write_now() -> None:  # in the disk's order, after the intervals it holds
            if not self._intervals.open_now:
                return  # the journal stopped meanwhile: its checkpoint stays the one it has
            try:
                write_atomic(path, text)
            except OSError as exc:
                self._intervals.stop_now()
                self._disk.on_loop(functools.partial(self._trouble.failed, name, exc))
                return
            self._disk.on_loop(lambda: self._trouble.written(name))
            self._intervals.restart_now()  # only once the checkpoint holds what the log did

        self._disk.submit(write_now, len(text))

    def sync(self) -> None:
        """The logs made to survive the host crashing too (in the disk's thread)."""
        self._records.sync()
        self._intervals.sync()

    def close(self) -> None:
        self._closed = True
        for f in (self._records, self._intervals):
            f.close()

    def _stop_if_broken(self) -> None:
        """After its first failed write the journal is written no more, all of it: its
        records, interval log and checkpoint stay consistent with one another (a checkpoint
        beside an interval log that was not started over would count intervals twice). Its
        files stop together in the disk's order (AppendFile.stop_with); here the loop hears of it."""
        if self._closed or not (self._records.closed or self._intervals.closed):
            return
        log.error(
            "%s: the journal is written no more; a controller restarted now would take the run "
            "over as of this point, without what comes after",
            self.directory,
        )
        self.close()


def _append(path: Path, trouble: DiskTrouble, disk: DiskWriter) -> AppendFile:
    """A journal file, appended to (after what an earlier controller wrote, if any)."""
    return AppendFile(path, trouble, keep_bytes=path.stat().st_size if path.exists() else None, disk=disk)


@dataclass(frozen=True)
class LoggedInterval:
    """An interval of the log read back: what the totals need of it."""

    start_ms: int
    step: str
    offsets: Offsets
    cluster: tuple[StatsRow, ...]
    agents: tuple[AgentRows, ...]
    missing: tuple[str, ...]

    def final(self, window: StepWindow) -> FinalInterval:
        from loadfleet.wire.stats import total_row

        total = total_row(self.cluster)
        return FinalInterval(
            step=window,
            start_ms=self.start_ms,
            agents=self.agents,
            cluster=self.cluster,
            total=total,
            missing=self.missing,
            scenario_totals=scenario_totals_of(self.cluster),  # a taken-over run keeps its scenarios' figures
        )


@dataclass
class JournalContents:
    """Everything a journal holds, read back in order."""

    records: list[dict[str, Any]] = field(default_factory=list)  # as written: {"kind": ..., fields}
    checkpoint: dict[str, Any] | None = None
    intervals: list[LoggedInterval] = field(default_factory=list)
    modified_s: float = 0.0  # when the journal was last written to (epoch seconds)

    def of_kind(self, kind: type[R]) -> Iterator[R]:
        """The records of one kind (records.py), in the order they were written."""
        return (from_doc(kind, r) for r in self.records if r.get("kind") == kind.KIND.value)

    def first(self, kind: type[R]) -> R | None:
        return next(self.of_kind(kind), None)


def has_journal(run_dir: Path) -> bool:
    return (run_dir / JOURNAL_DIR / RECORDS_FILE).is_file()


def read_journal(run_dir: Path) -> JournalContents:
    directory = run_dir / JOURNAL_DIR
    contents = JournalContents(records=list(_json_lines(directory / RECORDS_FILE)))
    paths = [directory / name for name in (RECORDS_FILE, INTERVALS_FILE, CHECKPOINT_FILE)]
    contents.modified_s = max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)
    checkpoint = directory / CHECKPOINT_FILE
    if checkpoint.exists():
        try:
            contents.checkpoint = json.loads(checkpoint.read_text())
        except ValueError:
            log.warning("%s is damaged; the run's totals are rebuilt without it", checkpoint)
    after = contents.checkpoint["watermark_ms"] if contents.checkpoint else None
    for record in _frames(directory / INTERVALS_FILE):
        if after is not None and record.interval_start_ms < after:
            continue  # covered by the checkpoint (written just before the log started over)
        contents.intervals.append(
            LoggedInterval(
                start_ms=record.interval_start_ms,
                step=record.step,
                offsets=Offsets(record.intervals_csv_bytes, record.latency_hlog_bytes),
                cluster=tuple(StatsRow.from_proto(r) for r in record.cluster),
                agents=tuple(AgentRows(a.agent_id, (), StatsRow.from_proto(a.total)) for a in record.agents),
                missing=tuple(record.missing),
            )
        )
    return contents


def _frames(path: Path) -> Iterator[journal_pb2.JournalInterval]:
    if not path.exists():
        return
    try:
        frames, _ = parse_frames(path.read_bytes())
    except FramingError:
        log.warning("%s is damaged; the intervals after its last good record are rebuilt from nothing", path)
        return
    for data in frames:  # a frame cut short at the end is left out by parse_frames
        yield journal_pb2.JournalInterval.FromString(data)


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open() as f:
        for line in f:
            try:
                yield json.loads(line)
            except ValueError:
                log.warning("%s: ignoring a line cut short (the controller died while writing it)", path)
                return
