"""The run's journal (`runs/<run-id>/journal/`): enough to take a run over after the
controller died, or to close it as interrupted with its summary.

- `run.jsonl`: one record per change of the run's course (the run started, a step started
  with its agents, a step was stopped, an agent's job ended, a step ended with its figures,
  a knee, a stop condition, skipped steps), appended and flushed at once. O(steps + agents).
- `intervals.jsonl`: each published interval since the last checkpoint: its cluster rows,
  each agent's total and how far intervals.csv and latency.hlog were written after it.
- `checkpoint.json`: the running totals (run, current step, drift baseline) as of an
  interval, written every `CHECKPOINT_INTERVALS` intervals and at each step's end; the
  interval log then starts over, so the journal stays O(agents) on disk too.

Records are JSON lines; a line cut short by a crash is ignored. Rows travel as base64
protobuf (codec.py), so histograms come back exact.
"""
from __future__ import annotations

import enum
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .codec import row_from_doc, row_to_doc
from .rundir import Offsets, write_atomic
from .stream import AgentRows, FinalInterval, StepWindow

log = logging.getLogger(__name__)

JOURNAL_DIR = "journal"
RECORDS_FILE = "run.jsonl"
INTERVALS_FILE = "intervals.jsonl"
CHECKPOINT_FILE = "checkpoint.json"
# A checkpoint every this many intervals bounds what a recovery replays (and the log's size).
CHECKPOINT_INTERVALS = 30


class Record(enum.StrEnum):
    RUN = "run"  # instance, agents, lease_ms
    STEP = "step"  # window (StepWindow), engines per agent
    HALT = "halt"  # step, at_ms
    JOB_ENDED = "job_ended"  # step, agent, state
    STEP_END = "step_end"  # result (StepResult)
    KNEE = "knee"  # servers, knee
    STOP = "stop"  # reason (StopReason)
    SKIPPED = "skipped"  # steps
    END = "end"  # state


class RunJournal:
    """Appends to a run's journal. Not thread-safe; the run's event loop owns it."""

    def __init__(self, run_dir: Path):
        self.directory = run_dir / JOURNAL_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self._records = (self.directory / RECORDS_FILE).open("a")
        self._intervals = (self.directory / INTERVALS_FILE).open("a")
        self.intervals_since_checkpoint = 0

    def record(self, kind: Record, **fields) -> None:
        self._records.write(json.dumps({"kind": kind.value, **fields}) + "\n")
        self._records.flush()

    def interval(self, interval: FinalInterval, offsets: Offsets) -> None:
        doc = {"start": interval.start_ms, "step": interval.step.name,
               "offsets": [offsets.intervals, offsets.hlog],
               "cluster": [row_to_doc(r) for r in interval.cluster],
               "agents": {a.agent_id: row_to_doc(a.total) for a in interval.agents},
               "missing": list(interval.missing)}
        self._intervals.write(json.dumps(doc) + "\n")
        self._intervals.flush()
        self.intervals_since_checkpoint += 1

    def checkpoint(self, state: dict) -> None:
        """Writes the running state (as of the last interval logged) and starts the interval
        log over; `state` is JSON values (see Checkpoint)."""
        write_atomic(self.directory / CHECKPOINT_FILE, json.dumps(state))
        self._intervals.truncate(0)
        self._intervals.seek(0)
        self.intervals_since_checkpoint = 0

    def sync(self) -> None:
        for f in (self._records, self._intervals):
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        for f in (self._records, self._intervals):
            f.close()


@dataclass(frozen=True)
class LoggedInterval:
    """An interval of the log read back: what the totals need of it."""

    start_ms: int
    step: str
    offsets: Offsets
    cluster: tuple
    agents: tuple[AgentRows, ...]
    missing: tuple[str, ...]

    def final(self, window: StepWindow) -> FinalInterval:
        from loadfleet.wire.stats import TOTAL, StatsRow, merge_rows
        total = merge_rows(self.cluster, target=TOTAL, request=TOTAL).get((TOTAL, TOTAL)) or StatsRow(TOTAL, TOTAL)
        return FinalInterval(step=window, start_ms=self.start_ms, agents=self.agents, cluster=self.cluster,
                             total=total, missing=self.missing)


@dataclass
class JournalContents:
    """Everything a journal holds, read back in order."""

    records: list[dict] = field(default_factory=list)
    checkpoint: dict | None = None
    intervals: list[LoggedInterval] = field(default_factory=list)
    modified_s: float = 0.0  # when the journal was last written to (epoch seconds)

    def of_kind(self, kind: Record) -> Iterator[dict]:
        return (r for r in self.records if r.get("kind") == kind.value)

    def first(self, kind: Record) -> dict | None:
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
    for doc in _json_lines(directory / INTERVALS_FILE):
        if after is not None and doc["start"] < after:
            continue  # covered by the checkpoint (written just before the log started over)
        contents.intervals.append(LoggedInterval(
            start_ms=doc["start"], step=doc["step"], offsets=Offsets(*doc["offsets"]),
            cluster=tuple(row_from_doc(r) for r in doc["cluster"]),
            agents=tuple(AgentRows(a, (), row_from_doc(r)) for a, r in doc["agents"].items()),
            missing=tuple(doc["missing"])))
    return contents


def _json_lines(path: Path) -> Iterator[dict]:
    if not path.exists():
        return
    with path.open() as f:
        for line in f:
            try:
                yield json.loads(line)
            except ValueError:
                log.warning("%s: ignoring a line cut short (the controller died while writing it)", path)
                return
