"""One job on this agent: its engines, and the merge of their intervals.

The assignment names each engine's share (one per core). Each engine
reports every interval; an interval is merged and sent up as soon as every engine
still alive has reported it, so the controller gets one report per interval per agent.

An engine that exits before the job ends, or falls silent for `SILENT_INTERVALS`
intervals while the others report (it is then killed), is an `EngineFailure` sent at once:
the controller's loss policy decides what becomes of its share (`adjust`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import signal
import time
from collections.abc import Callable

from loadfleet.v1 import agent_pb2, job_pb2, stats_pb2
from loadfleet.wire import DEFAULT_INTERVAL_MS
from loadfleet.wire.feedranges import split_rows
from loadfleet.wire.stats import TOTAL, merge_reports

from .artifacts import artifact_messages
from .drivers import Adjustable, Announcing, ArtifactSource, Driver, launch_drivers
from .errors import EngineError
from .guard import LoadPolicy
from .scenarioshares import changed_scenarios, scenario_engine_spec, scenario_index, users_of

log = logging.getLogger(__name__)

# Intervals an engine may miss, while the job runs, before it is taken for hung and killed.
SILENT_INTERVALS = 3
# A halted job's engines finish their requests in flight and report their partial interval;
# one still busy this long after (a request hanging) is killed.
HALT_GRACE_S = 1.0


class Outcome(enum.Enum):
    FINISHED = agent_pb2.JOB_STATE_FINISHED
    FAILED = agent_pb2.JOB_STATE_FAILED
    STOPPED = agent_pb2.JOB_STATE_STOPPED


def engine_specs(assignment: agent_pb2.Assignment) -> list[job_pb2.JobSpec]:
    """One spec per engine, with the share the controller gave that engine (it splits the
    fleet's load over every engine slot at once, so totals stay exact fleet-wide). The
    engines' users are numbered on from the agent's `first_user`, each engine after the
    users its predecessors can have, as the controller numbered them (fleet/scheduler.py),
    so `${user}` is unique across the fleet."""
    if not assignment.engines:
        return [assignment.spec]
    if assignment.spec.scenarios:
        return [scenario_engine_spec(assignment.spec, share) for share in assignment.engines]
    specs = []
    first_user = assignment.spec.first_user
    for share in assignment.engines:
        spec = job_pb2.JobSpec()
        spec.CopyFrom(assignment.spec)
        spec.load.CopyFrom(share.load)
        spec.max_requests = share.max_requests
        spec.first_user = first_user
        first_user += users_of(share.load)
        specs.append(spec)
    unique = (job_pb2.FEED_MODE_UNSPECIFIED, job_pb2.FEED_MODE_UNIQUE)
    if assignment.spec.HasField("feed") and assignment.spec.feed.mode in unique:
        split_feed(assignment.spec.feed, specs)
    return specs


def split_feed(feed: job_pb2.FeedSpec, specs: list[job_pb2.JobSpec]) -> None:
    """A unique feed's slice split over the engines exactly, each engine a contiguous part
    (the controller's split, fleet/feedsplit.py), so no two engines hold a row."""
    first = feed.first_row
    for spec, (start, end) in zip(specs, split_rows(first, first + len(feed.rows), len(specs))):
        del spec.feed.rows[:]
        spec.feed.rows.extend(feed.rows[start - first : end - first])
        spec.feed.first_row = start


def new_blocks(old: agent_pb2.EngineShare, new: agent_pb2.EngineShare) -> list[job_pb2.FeedBlock]:
    """The feed blocks handed to an engine that its last share did not hold (blocks only grow)."""
    held = {block.first_row for block in old.feed_added}
    return [block for block in new.feed_added if block.first_row not in held]


class JobRunner:
    """Runs one job; `send` queues a message for the controller (never blocks)."""

    def __init__(
        self,
        assignment: agent_pb2.Assignment,
        engine_program: str,
        send: Callable[[agent_pb2.AgentMessage], None],
        policy: LoadPolicy = LoadPolicy(),
        *,
        clock_offset_ms: int = 0,
    ):
        """`clock_offset_ms`: the controller's clock minus this host's (clock.py). The job's
        barrier is the controller's time: the engines get it in this host's, and the reports'
        interval times go back in the controller's."""
        local = agent_pb2.Assignment()
        local.CopyFrom(assignment)
        if local.spec.start_at_ms:
            local.spec.start_at_ms -= clock_offset_ms
        self._clock_offset_ms = clock_offset_ms
        self.spec = local.spec
        self._policy = policy
        self._engine_specs = engine_specs(local)
        self._program = engine_program
        self._send = send
        self._engines: list[Driver] = []
        self._live: set[int] = set()
        self._reported: dict[int, int] = {}  # engine -> requests it reported
        # engine -> scenario index -> requests its share reported: bounded by the engines
        # times the job's scenarios (names not in the spec are not counted).
        self._reported_by_scenario: dict[int, dict[int, int]] = {}
        self._scenario_of = scenario_index(local.spec)
        self._shares = list(local.engines)  # each engine's current share (adjust's base)
        self._last_report_s: dict[int, float] = {}  # engine -> when it last reported (monotonic)
        self._silent: set[int] = set()  # engines killed for falling silent
        self._pending: dict[int, dict[int, stats_pb2.IntervalReport]] = {}
        self._stopping = False
        self._killed = False
        self._halted = ""  # why all load stopped at once, its measurements kept (halt)
        self._failures: list[str] = []

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def pids(self) -> list[int]:
        return [e.pid for e in self._engines if e.returncode is None]

    async def run(self) -> Outcome:
        try:
            await self._start_engines()
        except EngineError as exc:
            self.kill()
            await asyncio.gather(*(e.wait() for e in self._engines))
            return self._report_state(Outcome.FAILED, str(exc))
        self._report_state_raw(agent_pb2.JOB_STATE_READY, self._ready_message())
        watchdog = asyncio.create_task(self._watch_silence(), name=f"silence-{self.job_id}")
        try:
            await asyncio.gather(*(self._follow(i, e) for i, e in enumerate(self._engines)))
        finally:
            watchdog.cancel()
        self._flush_all()
        self._send_artifacts()
        if self._killed:
            return self._report_state(Outcome.STOPPED, "stopped at once (the agent is stopping)")
        if self._halted:
            return self._report_state(Outcome.STOPPED, f"stopped at once: {self._halted}")
        if self._failures and len(self._failures) == len(self._engines):
            return self._report_state(Outcome.FAILED, "; ".join(self._failures))
        if self._stopping:
            return self._report_state(Outcome.STOPPED, "stopped by the controller")
        return self._report_state(Outcome.FINISHED, "; ".join(self._failures))

    async def adjust(self, shares: list[agent_pb2.EngineShare]) -> None:
        """Each live engine's new share (Adjust: the loss policy moved a lost share here).
        Rows of a unique feed handed on go first, so the users the share adds find them."""
        for index, share in enumerate(shares):
            engine = self._engines[index] if index < len(self._engines) else None
            if index in self._live and isinstance(engine, Adjustable):
                old = self._shares[index] if index < len(self._shares) else agent_pb2.EngineShare()
                if added := new_blocks(old, share):
                    await engine.append_rows(added)
                if self.spec.scenarios:
                    await self._adjust_scenarios(index, engine, old, share)
                else:
                    await engine.adjust(share.load, share.max_requests)
                if index < len(self._shares):
                    self._shares[index] = share

    async def _adjust_scenarios(
        self, index: int, engine: Adjustable, old: agent_pb2.EngineShare, share: agent_pb2.EngineShare
    ) -> None:
        """One `scenario_adjust` per scenario whose share changed on this engine."""
        for change in changed_scenarios(self.spec, old, share):
            await engine.adjust_scenario(change.scenario, change.load, change.max_requests)

    async def stop(self) -> None:
        """Graceful stop: engines finish in-flight requests and report the partial interval."""
        self._stopping = True
        await asyncio.gather(*(e.stop() for e in self._engines))

    async def halt(self, why: str) -> None:
        """Stops all load now, keeping its measurements: no engine sends another request,
        each reports its partial interval, and one still busy after HALT_GRACE_S is killed."""
        self._halted = why
        self._stopping = True
        await asyncio.gather(*(e.stop() for e in self._engines))
        loop = asyncio.get_running_loop()
        for engine in self._engines:
            loop.call_later(HALT_GRACE_S, engine.kill)

    @property
    def halted(self) -> bool:
        return bool(self._halted)

    def kill(self) -> None:
        """Stops all load now (no final interval)."""
        self._killed = True
        for engine in self._engines:
            engine.kill()

    async def _start_engines(self) -> None:
        await launch_drivers(self.spec, self._engine_specs, self._program, self._started, self._policy)

    def _started(self, driver: Driver) -> None:
        self._engines.append(driver)
        self._live.add(len(self._engines) - 1)
        if self._killed:
            driver.kill()

    def _ready_message(self) -> str:
        if self._engines and isinstance(self._engines[0], Announcing):  # a Gatling JVM
            return self._engines[0].ready_message()
        return f"{len(self._engines)} engine(s) ready"

    async def _follow(self, index: int, engine: Driver) -> None:
        finished = False
        failure = None
        try:
            while (event := await engine.next_event()) is not None:
                kind = event.WhichOneof("event")
                if kind == "interval":
                    self._collect(index, event.interval)
                elif kind == "finished":
                    finished = True
                elif kind == "failed":
                    failure = event.failed.message
        except EngineError as exc:
            failure = str(exc)
            engine.kill()
        code = await engine.wait()
        how = ""
        if failure is None and not finished and not self._killed:
            how = (
                f"silent for {SILENT_INTERVALS} intervals, killed"
                if index in self._silent
                else f"killed by {signal.Signals(-code).name}"
                if code < 0
                else f"exited with status {code}"
            )
            failure = f"{how}: {engine.stderr_tail()}"
        if failure:
            self._failures.append(f"engine {engine.pid}: {failure}")
        self._live.discard(index)
        self._flush_complete()
        if failure and not self._killed and not self._stopping:
            self._send(
                agent_pb2.AgentMessage(
                    engine_failure=agent_pb2.EngineFailure(
                        job_id=self.job_id,
                        engine=index,
                        pid=engine.pid,
                        how=how or failure,
                        stderr_tail=engine.stderr_tail(),
                        reported_requests=self._reported.get(index, 0),
                        reported=[
                            agent_pb2.ScenarioCount(scenario=scenario, requests=requests)
                            for scenario, requests in sorted(self._reported_by_scenario.get(index, {}).items())
                        ],
                    )
                )
            )

    async def _watch_silence(self) -> None:
        """Kills an engine that has reported nothing for SILENT_INTERVALS intervals while the
        job runs (its `_follow` then reports the failure)."""
        interval_s = (self.spec.interval_ms or DEFAULT_INTERVAL_MS) / 1000
        limit_s = SILENT_INTERVALS * interval_s
        # Load starts at the barrier (or now, when it has passed): no report is due before.
        barrier = time.monotonic() + max(0.0, self.spec.start_at_ms / 1000 - time.time())
        load_end = barrier + self.spec.duration_ms / 1000
        # After the load, an engine waits for its requests in flight before its final report:
        # a saturated server may take each one up to the connect and request timeouts.
        drain_s = (self.spec.connect_timeout_ms + self.spec.request_timeout_ms) / 1000
        while True:
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            limit = limit_s + (drain_s if now > load_end else 0.0)
            for index in list(self._live):
                if now - max(barrier, self._last_report_s.get(index, barrier)) > limit:
                    log.warning(
                        "job %s: engine %d reported nothing for %d intervals; killing it",
                        self.job_id,
                        self._engines[index].pid,
                        SILENT_INTERVALS,
                    )
                    self._silent.add(index)
                    self._engines[index].kill()

    def _send_artifacts(self) -> None:
        """Files the drivers left for the run directory (Gatling's report), before the job's
        end state, through the same outbox as measurements."""
        for engine in self._engines:
            if isinstance(engine, ArtifactSource):
                for name, data in engine.artifacts():
                    for message in artifact_messages(self.job_id, name, data):
                        self._send(message)

    def _collect(self, index: int, report: stats_pb2.IntervalReport) -> None:
        self._reported[index] = self._reported.get(index, 0) + sum(s.requests for s in report.stats)
        counts = self._reported_by_scenario.setdefault(index, {})
        for row in report.stats:
            if (scenario := self._scenario_of.get(row.scenario)) is not None and row.target != TOTAL:
                counts[scenario] = counts.get(scenario, 0) + row.requests
        self._last_report_s[index] = time.monotonic()
        self._pending.setdefault(report.interval_start_ms, {})[index] = report
        self._flush_complete()

    def _flush_complete(self) -> None:
        """Sends, oldest first, every interval that all live engines have reported."""
        for start in sorted(self._pending):
            if not self._live <= self._pending[start].keys():
                break
            self._emit(self._pending.pop(start))

    def _flush_all(self) -> None:
        for start in sorted(self._pending):
            self._emit(self._pending.pop(start))

    def _emit(self, reports: dict[int, stats_pb2.IntervalReport]) -> None:
        merged = merge_reports(reports.values(), with_total=True, buckets=True)
        merged.interval_start_ms += self._clock_offset_ms
        if self.spec.scenarios:  # the total over scenarios, even in an interval with no rows
            for row in merged.stats:
                if row.target == TOTAL and row.request == TOTAL:
                    row.scenario = TOTAL
        self._send(agent_pb2.AgentMessage(interval=agent_pb2.AgentInterval(job_id=self.job_id, report=merged)))

    def _report_state(self, outcome: Outcome, message: str) -> Outcome:
        self._report_state_raw(outcome.value, message)
        return outcome

    def _report_state_raw(self, state: agent_pb2.JobState, message: str) -> None:
        log.info("job %s: %s %s", self.job_id, agent_pb2.JobState.Name(state), message)
        self._send(
            agent_pb2.AgentMessage(job_status=agent_pb2.JobStatus(job_id=self.job_id, state=state, message=message))
        )
