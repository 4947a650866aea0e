"""The journal's records (`journal/run.jsonl`): one frozen dataclass per change of a run's
course, written as a JSON line `{"kind": ..., <its fields>}` (codec.py) and read back as
the same dataclass. A field added later has a default, so an older journal still reads.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from loadfleet.controller.analysis.knee import Knee
from loadfleet.controller.analysis.stops import StopReason
from loadfleet.controller.fleet.jobs import JobState
from loadfleet.controller.fleet.losses import Loss
from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.model.stepresult import StepResult
from loadfleet.controller.stream.contract import StepWindow


class Record(enum.StrEnum):
    RUN = "run"
    STEP = "step"
    LOSS = "loss"
    HALT = "halt"
    JOB_ENDED = "job_ended"
    STEP_END = "step_end"
    KNEE = "knee"
    STOP = "stop"
    SKIPPED = "skipped"
    END = "end"
    INCOMPLETE = "incomplete"


@dataclass(frozen=True)
class RunStarted:
    KIND: ClassVar[Record] = Record.RUN
    agents: tuple[str, ...]
    hostnames: tuple[str, ...] = ()
    clock_offsets_ms: dict[str, int] = field(default_factory=dict)  # the controller's clock minus each agent's


@dataclass(frozen=True)
class StepStarted:
    KIND: ClassVar[Record] = Record.STEP
    window: StepWindow
    engines: dict[str, int]  # agent -> engines running its share
    shares: dict[str, tuple[EngineShare, ...]] = field(default_factory=dict)  # agent -> its engines' shares


@dataclass(frozen=True)
class ShareLost:
    KIND: ClassVar[Record] = Record.LOSS
    loss: Loss
    shares: dict[str, tuple[EngineShare, ...]]  # the agents whose engines' shares changed: theirs now


@dataclass(frozen=True)
class StepHalted:
    KIND: ClassVar[Record] = Record.HALT
    step: str
    load_end_ms: int


@dataclass(frozen=True)
class JobEnded:
    KIND: ClassVar[Record] = Record.JOB_ENDED
    step: str
    agent: str
    state: JobState


@dataclass(frozen=True)
class StepEnded:
    KIND: ClassVar[Record] = Record.STEP_END
    result: StepResult


@dataclass(frozen=True)
class KneeRecorded:
    KIND: ClassVar[Record] = Record.KNEE
    servers: int
    knee: Knee


@dataclass(frozen=True)
class StopDecided:
    KIND: ClassVar[Record] = Record.STOP
    reason: StopReason


@dataclass(frozen=True)
class StepsSkipped:
    KIND: ClassVar[Record] = Record.SKIPPED
    steps: tuple[str, ...]


@dataclass(frozen=True)
class RunEnded:
    KIND: ClassVar[Record] = Record.END
    state: str


@dataclass(frozen=True)
class FileIncomplete:
    """A file of the run directory a full disk left incomplete (rundisk.py)."""

    KIND: ClassVar[Record] = Record.INCOMPLETE
    file: str


JournalRecord = (
    RunStarted
    | StepStarted
    | ShareLost
    | StepHalted
    | JobEnded
    | StepEnded
    | KneeRecorded
    | StopDecided
    | StepsSkipped
    | RunEnded
    | FileIncomplete
)
