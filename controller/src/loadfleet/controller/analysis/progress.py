"""How far a run has got, as a value: a run starts from an empty one, and a controller that
takes a run over after a restart builds one from the run's journal (run/recovery.py) and
hands it to the run, which goes on from there. The run's summary is assembled from it
(summary.py).

Everything here is O(agents + steps): per-interval state lives in the stream's window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadfleet.controller.analysis.knee import Knee
from loadfleet.controller.analysis.stops import StopReason
from loadfleet.controller.fleet.losses import Loss
from loadfleet.controller.model.stepresult import StepResult


@dataclass
class RunProgress:
    """The run's agents, the steps it measured or skipped, the knees found, why it stopped
    early, the shares it lost and the requests reported too late."""

    agents: list[str] = field(default_factory=list)
    hostnames: set[str] = field(default_factory=set)
    clock_offsets_ms: dict[str, int] = field(default_factory=dict)  # the controller's clock minus each agent's
    results: list[StepResult] = field(default_factory=list)
    knees: dict[int, Knee] = field(default_factory=dict)  # servers -> the knee found for them
    skipped: list[str] = field(default_factory=list)
    stop: StopReason | None = None
    losses: list[Loss] = field(default_factory=list)
    late: dict[str, int] = field(default_factory=dict)  # agent -> requests in reports that came too late
