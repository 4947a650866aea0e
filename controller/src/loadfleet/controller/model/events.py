"""Run events: what happened during a run besides measurements (annotations)."""

from __future__ import annotations

import enum
import time
from dataclasses import asdict, dataclass, field


class EventKind(enum.Enum):
    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    RUN_STOPPED = "run_stopped"
    AGENT_JOINED = "agent_joined"
    AGENT_LOST = "agent_lost"
    AGENT_LATE = "agent_late"  # silent or disconnected, within its job's lease: waited for
    AGENT_BACK = "agent_back"  # a late agent heard again, or a lost one back for the next step
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
    DRIVER_READY = "driver_ready"  # a Gatling JVM is ready on an agent (its start-up, how late its load starts)
    LOSS_POLICY = "loss_policy"  # the plan's agents.on_loss acted on a lost agent's share
    CLOCK_OFFSET = "clock_offset"  # an agent's clock is off the controller's by more than the limit
    ENGINE_FAILED = "engine_failed"  # an engine exited or fell silent during a job
    SPOOL_DROPPED = "spool_dropped"  # an agent's spool or the InfluxDB spool dropped its oldest data (spooldrops.py)
    DISK_FULL = "disk_full"  # a file of the run directory could not be written (rundisk.py)
    CONTROLLER_STALLED = "controller_stalled"  # the controller's own event loop fell behind (selfwatch.py)
    THRESHOLD_FAILING = "threshold_failing"  # a threshold of the plan started failing (analysis/thresholds.py)
    THRESHOLD_RECOVERED = "threshold_recovered"
    THRESHOLD_ABORT = "threshold_abort"  # a failing threshold's `abort` ended the run
    TARGET_FAILED = "target_failed"  # a step's requests failed on the target's side (analysis/genbound.py)
    SCENARIO_STARTED = "scenario_started"  # a scenario of the plan started its load (Event.scenario)
    SCENARIO_ENDED = "scenario_ended"


@dataclass(frozen=True)
class Event:
    kind: EventKind
    text: str
    agent_id: str = ""
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    scenario: str = ""  # the scenario it is about; "": the whole run

    def to_doc(self) -> dict[str, object]:
        """As events.jsonl and summary.json hold it: a whole-run event without `scenario`, as
        before scenarios."""
        doc: dict[str, object] = {**asdict(self), "kind": self.kind.value}
        if not self.scenario:
            del doc["scenario"]
        return doc
