"""What the controller asks of one agent, and what the agent says back about it."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .plan import Plan
from .scheduler import EngineShare


class JobState(enum.Enum):
    READY = "ready"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def ended(self) -> bool:
        return self in (JobState.FINISHED, JobState.FAILED, JobState.STOPPED)


# A sweep's steps are jobs of their own: `<run id>/<step>`. A one-step run's job is the run.
_STEP_SEPARATOR = "/"


def job_id_for(run_id: str, step: str, *, single: bool) -> str:
    return run_id if single else f"{run_id}{_STEP_SEPARATOR}{step}"


def run_id_of(job_id: str) -> str:
    return job_id.split(_STEP_SEPARATOR, 1)[0]


@dataclass(frozen=True)
class JobAssignment:
    """One agent's share of a run: the plan, and the share of each engine to start."""

    job_id: str
    plan: Plan
    engines: tuple[EngineShare, ...]
    start_at_ms: int


@dataclass(frozen=True)
class JobReport:
    """One interval of one job from one agent, already decoded (see convert.py)."""

    job_id: str
    agent_id: str
    interval_start_ms: int
    rows: list
    final: bool
    error_samples: tuple[str, ...] = ()
