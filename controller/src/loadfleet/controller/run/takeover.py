"""A run taken over from its journal by a restarted controller (recovery.py reads the
journal; this picks the run up where it was).

`restore` puts back what the journal holds: the agents, the ended steps, the step that was
running, the totals as of the last published interval (the files are cut back to it). Then
either the run goes on (`go_on`: agents that reconnect in time keep their jobs, send again
what was not acknowledged, and the rest of the steps run), or it is closed as interrupted
(`close_interrupted`: its summary from what was published before).
"""

from __future__ import annotations

import asyncio
import time

from loadfleet.controller.analysis.summary import RunSummary
from loadfleet.controller.fleet.jobs import JobState
from loadfleet.controller.fleet.losses import StepShares
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.plan.redact import has_redactions
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.run.recovery import Recovered
from loadfleet.controller.run.run import FINISH_SLACK_MS, Run, RunState, _StepRun
from loadfleet.controller.stream.contract import StepWindow


class TakenOverRun(Run):
    def restore(self, recovered: Recovered) -> None:
        """Takes the run's state back from its journal (recovery.py): its agents, its ended
        steps, the step it was running, the totals as of its last published interval and
        its files cut back to that interval."""
        self._agents, self._hostnames = list(recovered.agents), set(recovered.hostnames)
        self._clock_offsets_ms = dict(recovered.clock_offsets_ms)
        self._results = list(recovered.results)
        self._knees, self._stop_reason, self._skipped = dict(recovered.knees), recovered.stop, list(recovered.skipped)
        self._losses.losses = list(recovered.losses)
        step = recovered.step
        if step is not None:
            shares = StepShares(step.window.job_id, step.window.name, step.window.interval_ms, step.shares)
            for loss in step.losses:
                shares.restore(loss)
            for agent in step.ended:
                shares.ended(agent)
            self._step = _StepRun(
                self._spec(step.window.name),
                step.window,
                dict(step.engines),
                {a: JobState(state) for a, state in step.ended.items()},
                shares,
            )
            self._job_steps[step.window.job_id] = step.window.name
        self._pipeline.resume(recovered, self._window_of)
        if recovered.checkpoint:
            self._late = dict(recovered.checkpoint.get("late", {}))
        if step is not None:
            self._window.open_step(
                step.window, [a for a in step.engines if a not in step.ended], watermark_ms=recovered.watermark_ms
            )

    def _spec(self, name: str) -> StepSpec:
        return next(s for s in self._specs if s.name == name)

    def _window_of(self, name: str) -> StepWindow:
        """The window of a step of this run: the running one's, or one rebuilt from an ended
        step's figures (enough to fold its intervals into the totals again)."""
        if self._step is not None and self._step.window.name == name:
            return self._step.window
        result = next(r for r in self._results if r.name == name)
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
        step = self._step
        return (
            step is not None
            and job_id == step.window.job_id
            and agent_id in step.engines
            and agent_id not in step.ended
            and agent_id not in self._lost
        )

    async def go_on(self, reconnect_s: float) -> RunSummary:
        """Goes on with the run: its agents have `reconnect_s` to come back; then its running
        step ends as usual, and the rest of its steps run."""
        return await self._conclude(self._after_restart(reconnect_s))

    async def _after_restart(self, reconnect_s: float) -> str:
        self.state = RunState.RUNNING
        since = time.strftime("%H:%M:%S", time.localtime(self._window.watermark_ms / 1000))
        self._emit(
            Event(
                EventKind.RUN_RECOVERED,
                f"run {self.run_id} taken over by a restarted controller; its intervals go on from {since}",
            )
        )
        assert self._step is not None  # a run goes on only with a running step (recovery.adoptable)
        watch = asyncio.create_task(self._lose_absent_agents(reconnect_s), name=f"reconnect-{self.run_id}")
        try:
            await self._collect(
                self._step,
                not_before_ms=self._clock_ms() + round(reconnect_s * 1000) + self._window.revision_ms + FINISH_SLACK_MS,
            )
        finally:
            watch.cancel()
        done = {r.name for r in self._results} | set(self._skipped)
        rest = [s for s in self._specs if s.name not in done]
        if rest and has_redactions(self.plan):  # plan.yaml keeps no credentials
            self._skip([s.name for s in rest])
            return (
                f"the plan's credentials are not kept on disk, so steps {', '.join(s.name for s in rest)} "
                "could not run after the controller restarted"
            )
        await self._run_steps(rest)
        return ""

    async def _lose_absent_agents(self, reconnect_s: float) -> None:
        await asyncio.sleep(reconnect_s)
        for agent_id in self._agents:
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
