"""Run events: what happened during a run besides measurements (annotations)."""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field


class EventKind(enum.Enum):
    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    RUN_STOPPED = "run_stopped"
    AGENT_JOINED = "agent_joined"
    AGENT_LOST = "agent_lost"
    JOB_FAILED = "job_failed"
    STEP_STARTED = "step_started"
    STEP_FINISHED = "step_finished"
    KNEE = "knee"
    STOP_CONDITION = "stop_condition"
    GENERATOR_BOUND = "generator_bound"
    TARGET_DOWN = "target_down"  # every request to a target failed without an answer (targethealth.py)
    TARGET_UP = "target_up"
    LATE_REPORTS = "late_reports"  # reports after their interval was published without them (window.py)
    RUN_RECOVERED = "run_recovered"  # a restarted controller took the run over from its journal
    SPOOL_DROPPED = "spool_dropped"  # an agent's spool or the InfluxDB spool dropped its oldest data (spooldrops.py)
    DISK_FULL = "disk_full"  # a file of the run directory could not be written (rundisk.py)


@dataclass(frozen=True)
class Event:
    kind: EventKind
    text: str
    agent_id: str = ""
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
