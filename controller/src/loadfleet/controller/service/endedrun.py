"""What the controller keeps of a run once it has ended (`EndedRun`): its identity, figures
and followers, not its machinery."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadfleet.controller.model.runstate import RunState
from loadfleet.controller.output.watchers import Follower, Watchers
from loadfleet.controller.run.run import Run


@dataclass(frozen=True)
class EndedRun:
    """What the controller keeps of a run once it has ended: its summary and events."""

    run_id: str
    plan_name: str
    state: RunState
    started_ms: int
    finished_ms: int
    total_requests: int
    run_dir: Path
    watchers: Watchers

    @classmethod
    def of(cls, run: Run) -> EndedRun:
        return cls(
            run.run_id,
            run.plan_name,
            run.state,
            run.started_ms,
            run.finished_ms,
            run.total_requests,
            run.run_dir,
            run.watchers,
        )

    def follow(self) -> Follower:
        return self.watchers.follow()

    def stop(self) -> None:
        pass
