"""A run taken over from its journal by a restarted controller (recovery.py reads the
journal; this picks the run up where it was).

The run starts from what the journal holds (recovery.py's `Recovered`): how far it got
(agents, ended steps, knees, losses), the step that was running, the totals as of the last
published interval (the files are cut back to it). Then
either the run goes on (`go_on`: agents that reconnect in time keep their jobs, send again
what was not acknowledged, and the rest of the steps run), or it is closed as interrupted
(`close_interrupted`: its summary from what was published before).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from loadfleet.controller.analysis.summary import RunSummary
from loadfleet.controller.fleet.agents import AgentRegistry
from loadfleet.controller.fleet.losses import StepShares
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.redact import has_redactions
from loadfleet.controller.run.recovery import Recovered, RecoveredStep
from loadfleet.controller.run.run import Run, RunState
from loadfleet.controller.run.stepping import FINISH_SLACK_MS, StepRun
from loadfleet.controller.stream.contract import StepWindow


class TakenOverRun(Run):
    """A run that starts from its journal: how far it got (`recovered.progress`), the step that
    was running, and its files cut back to its last published interval."""

    def __init__(
        self, run_id: str, plan: Plan, run_dir: Path, registry: AgentRegistry, recovered: Recovered, **options: Any
    ):
        super().__init__(run_id, plan, run_dir, registry, progress=recovered.progress, **options)
        running = self._running_step(recovered.step)
        self._pipeline.resume(recovered, lambda name: self._window_of(name, running))
        if running is not None:
            self._steps.resume(running, watermark_ms=recovered.watermark_ms)

    def _running_step(self, step: RecoveredStep | None) -> StepRun | None:
        if step is None:
            return None
        shares = StepShares(
            step.window.job_id, step.window.name, step.window.interval_ms, step.shares, step.window.scenarios
        )
        for loss in step.losses:
            shares.restore(loss)
        for agent in step.ended:
            shares.ended(agent)
        ended = dict(step.ended)
        return StepRun(self._course.spec(step.window.name), step.window, dict(step.engines), ended, shares)

    def _window_of(self, name: str, running: StepRun | None) -> StepWindow:
        """The window of a step of this run: the running one's, or one rebuilt from an ended
        step's figures (enough to fold its intervals into the totals again)."""
        if running is not None and running.window.name == name:
            return running.window
        result = next(r for r in self._progress.results if r.name == name)
        return StepWindow(
            name=name,
            index=0,
            job_id="",
            load="",
            interval_ms=self.plan.interval_ms,
            load_start_ms=result.start_ms,
            load_end_ms=result.start_ms + round(result.measured_s * 1000),
        )

    def adopts(self, agent_id: str, job_id: str) -> bool:
        """Whether this (taken over) run collects the agent's running job."""
        step = self._steps.current
        return step is not None and step.runs(agent_id, job_id) and agent_id not in self._lost

    async def go_on(self, reconnect_s: float) -> RunSummary:
        """Goes on with the run: its agents have `reconnect_s` to come back; then its running
        step ends as usual, and the rest of its steps run."""
        return await self._conclude(self._after_restart(reconnect_s))

    async def _after_restart(self, reconnect_s: float) -> str:
        self.state = RunState.RUNNING
        window = self._steps.window
        since = time.strftime("%H:%M:%S", time.localtime(window.watermark_ms / 1000))
        self._emit(
            Event(
                EventKind.RUN_RECOVERED,
                f"run {self.run_id} taken over by a restarted controller; its intervals go on from {since}",
            )
        )
        assert self._steps.current is not None  # a run goes on only with a running step (recovery.adoptable)
        watch = asyncio.create_task(self._lose_absent_agents(reconnect_s), name=f"reconnect-{self.run_id}")
        try:
            await self._steps.collect(
                not_before_ms=self._clock_ms() + round(reconnect_s * 1000) + window.revision_ms + FINISH_SLACK_MS,
            )
        finally:
            watch.cancel()
        if self._course.upcoming() and has_redactions(self.plan):  # plan.yaml keeps no credentials
            names = self._skip_the_rest()
            return (
                f"the plan's credentials are not kept on disk, so steps {', '.join(names)} "
                "could not run after the controller restarted"
            )
        await self._run_steps()
        return ""

    async def _lose_absent_agents(self, reconnect_s: float) -> None:
        await asyncio.sleep(reconnect_s)
        for agent_id in self._progress.agents:
            record = self._registry.get(agent_id)
            if record is None or record.link is None:
                self.on_agent_lost(
                    agent_id, f"it did not reconnect within {reconnect_s:g} s of the controller's restart"
                )

    async def close_interrupted(self, message: str) -> RunSummary:
        """Ends a run that cannot go on: its summary from what was published before."""
        self.state = RunState.INTERRUPTED
        summary = await self._finish(message)
        for sink in self.sinks:
            await sink.close()
        return summary
