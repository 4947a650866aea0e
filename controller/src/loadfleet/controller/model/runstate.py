"""The states of a run, from starting to how it ended."""

from __future__ import annotations

import enum


class RunState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def ended(self) -> bool:
        return self in (RunState.FINISHED, RunState.STOPPED, RunState.FAILED, RunState.INTERRUPTED)
