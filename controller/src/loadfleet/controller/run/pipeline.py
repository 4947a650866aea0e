"""A run's pipeline: the consumers of its stream, its run directory and its journal.

The run (run.py) decides what happens: which agents, which steps, when a step ends. The
pipeline is where what happened goes: each closed interval merged, to every consumer and
then into the journal, in slices that leave the event loop to the sessions in between
(publisher.py), each event and heartbeat to those that take them, a step's figures out of
the consumers that measure it, a checkpoint every `CHECKPOINT_INTERVALS` intervals, and at
the end the summary's files. Followers (WatchRun) hear events from the start; the other
consumers join once the run has its agents (`open`), or its journal read back (`resume`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from loadfleet.controller.analysis.bottleneck import find_bottleneck
from loadfleet.controller.analysis.drift import Drift
from loadfleet.controller.analysis.genbound import GeneratorHealth
from loadfleet.controller.analysis.hosts import HostRecorder
from loadfleet.controller.analysis.selfwatch import ControllerRecorder
from loadfleet.controller.analysis.steps import StepMeter
from loadfleet.controller.analysis.stops import StopReason, StopWatch
from loadfleet.controller.analysis.summary import RunSummary
from loadfleet.controller.analysis.targethealth import TargetHealth
from loadfleet.controller.analysis.thresholds import ThresholdWatch
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.model.codec import to_doc
from loadfleet.controller.model.driver import Driver
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.load import LoadModel
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.model.stepresult import StepResult, StepState
from loadfleet.controller.model.verdict import Validity
from loadfleet.controller.output import rundir
from loadfleet.controller.output.diskwriter import DiskWriter
from loadfleet.controller.output.feedledger import FeedLedger, LedgerOutput
from loadfleet.controller.output.rundisk import DiskTrouble
from loadfleet.controller.output.sinks import Sink
from loadfleet.controller.output.sinks.output import InfluxOutput
from loadfleet.controller.output.watchers import Watchers
from loadfleet.controller.plan.feeds import FeedMode
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.run.journal import CHECKPOINT_INTERVALS, RunJournal
from loadfleet.controller.run.records import FileIncomplete, JournalRecord, RunEnded, RunStarted, StepEnded
from loadfleet.controller.run.recovery import Recovered
from loadfleet.controller.stream.contract import IntervalConsumer, StepEnd, StepWindow, Stream
from loadfleet.controller.stream.publisher import Publisher
from loadfleet.controller.stream.window import ClosedInterval


class RunPipeline:
    def __init__(
        self,
        run_id: str,
        plan: Plan,
        run_dir: Path,
        *,
        heartbeat_ms: int,
        sinks: list[Sink],
        on_stop: Callable[[StopReason], None],
        settle: Callable[[str, int], None] = lambda agent, seq: None,
    ):
        self.run_dir = run_dir
        self._plan = plan
        # Files of the run directory that could not be written (a full disk): the first is
        # an event, each is in the journal (a restarted controller leaves it as it is) and
        # all are in the summary.
        self.trouble = DiskTrouble(
            run_dir, on_first=lambda text: self.event(Event(EventKind.DISK_FULL, text)), on_incomplete=self._incomplete
        )
        # The run directory's and journal's writes, in order, off the event loop; what must
        # follow them (settling agents' reports, followers) waits for them (`then`).
        self.disk = DiskWriter()
        self.thresholds = self._watch(on_stop)
        self.watchers = Watchers(deliver=self.disk.then, failing_thresholds=lambda: self.thresholds.failing_now)
        self.totals = RunTotals()
        self.meter = StepMeter()
        multi_core = plan.driver is Driver.GATLING  # one JVM on every core of its agent
        self.generators = GeneratorHealth(
            heartbeat_ms,
            # The open model's cap over the fleet; with scenarios (an idle closed plan-level
            # load) each engine's own is judged.
            max_connections=plan.load.max_connections if plan.load.model is LoadModel.OPEN else 0,
            multi_core_driver=multi_core,
            emit=self.event,
        )
        self.hosts = HostRecorder(period_ms=heartbeat_ms)
        self.controller_health = ControllerRecorder(emit=self.event)
        self._output = InfluxOutput(run_id, sinks, emit=self.event, multi_core_driver=multi_core) if sinks else None
        self.drift = Drift(plan.interval_ms, emit=self._output.on_drift if self._output else lambda point: None)
        self.target_health = TargetHealth([t.url for t in plan.targets], plan.interval_ms, emit=self.event)
        self._stopwatch = StopWatch(plan.stop, plan.interval_ms, on_stop=on_stop)
        self.writer: rundir.RunDirWriter | None = None
        self._journal: RunJournal | None = None
        self._publisher = Publisher(lambda settles: self.disk.then(functools.partial(_settle_all, settle, settles)))
        self._event_times: dict[EventKind, int] = {}
        self._stream = Stream([self.watchers, *filter(None, [self._output])])
        unique = plan.feed is not None and plan.feed.mode is FeedMode.UNIQUE
        ledger = FeedLedger(len(plan.feed.rows)) if plan.feed and unique else None
        self.ledger = LedgerOutput(ledger, run_dir, self.trouble, self.disk) if ledger else None

    def _watch(self, on_stop: Callable[[StopReason], None]) -> ThresholdWatch:
        """The plan's thresholds: live events, an abort through the stop conditions' path, the
        verdict at the end; followers see which fail (it is subscribed before them)."""
        plan = self._plan
        named = {t.name: t.url for t in plan.targets if t.name}
        return ThresholdWatch(
            plan.thresholds, plan.verdict, interval_ms=plan.interval_ms, targets=named, emit=self.event, on_stop=on_stop
        )

    @property
    def open(self) -> bool:
        return self._journal is not None

    def start(self, *, agents: list[str], hostnames: list[str], clock_offsets_ms: dict[str, int]) -> None:
        """The run has its agents: plan.yaml, the run directory's files, the journal."""
        rundir.write_plan(self.run_dir, self._plan.to_yaml(), self.trouble)
        self.writer = rundir.RunDirWriter(
            self.run_dir,
            [t.url for t in self._plan.targets],
            trouble=self.trouble,
            disk=self.disk,
            scenarios=bool(self._plan.scenarios),
        )
        self._journal = RunJournal(self.run_dir, self.trouble, self.disk)
        self.record(RunStarted(tuple(agents), tuple(hostnames), dict(clock_offsets_ms)))
        for name in self.trouble.incomplete:  # before the journal was there: plan.yaml
            self._incomplete(name)
        self._subscribe()

    def resume(self, recovered: Recovered, window_of: Callable[[str], StepWindow]) -> None:
        """The run's files cut back to its last published interval, its journal reopened,
        and its totals as they were then: the checkpoint, and the intervals logged after it
        folded in again (InfluxDB gets their points again; it replaces them)."""
        for event in recovered.events:
            self.watchers.on_event(event)
        for name in recovered.incomplete_files:
            self.trouble.cut_short(name)
        self.writer = rundir.RunDirWriter(
            self.run_dir,
            [t.url for t in self._plan.targets],
            resume=recovered.offsets,
            trouble=self.trouble,
            disk=self.disk,
            scenarios=bool(self._plan.scenarios),
        )
        self.writer.results = list(recovered.progress.results)
        self._journal = RunJournal(self.run_dir, self.trouble, self.disk)
        if recovered.checkpoint:
            self.totals = RunTotals.restore(recovered.checkpoint["totals"])
            self.meter.restore(recovered.checkpoint["meter"])
            self.drift.restore(recovered.checkpoint["drift"])
            if "thresholds" in recovered.checkpoint:
                self.thresholds.restore(recovered.checkpoint["thresholds"])
            else:  # written by a controller from before thresholds were judged
                self.thresholds.partial = True
        self._subscribe()
        consumers: list[IntervalConsumer | None] = [self.totals, self.meter, self.thresholds, self._output]
        self.thresholds.quiet = True  # their events were published, and a stop decided, before the restart
        for logged in recovered.intervals:
            published = logged.final(window_of(logged.step))
            published = replace(published, verdict=self.generators.judge(published))  # from its rows alone now
            for consumer in filter(None, consumers):
                consumer.on_interval(published)
            self.drift.observe(published.start_ms, published.total)
        self.thresholds.quiet = False

    def _subscribe(self) -> None:
        # The run directory first: what the others publish is then already on disk.
        self._stream = Stream(
            filter(
                None,
                [
                    self.writer,
                    self.ledger,
                    self.totals,
                    self.meter,
                    self.generators,
                    self.hosts,
                    self.controller_health,
                    self.drift,
                    self.target_health,
                    self._stopwatch,
                    self.thresholds,
                    self._output,
                    self.watchers,
                ],
            )
        )

    # ---- what flows -------------------------------------------------------------

    def publish(self, closed: ClosedInterval, *, late: dict[str, int]) -> None:
        """An interval is closed: merged, judged (generator health), to every consumer, then
        into the journal, its reports then settled; in slices, after those closed before."""
        self._publisher.put(closed, self._publishing(closed, late))

    def _publishing(self, closed: ClosedInterval, late: dict[str, int]) -> Iterator[None]:
        interval = closed.merged()
        interval = replace(interval, verdict=self.generators.judge(interval))
        yield
        yield from self._stream.interval_steps(interval)
        if self._journal is not None:
            assert self.writer is not None  # start() and resume() open both
            self._journal.interval(interval, self.writer.offsets)
            if self._journal.intervals_since_checkpoint >= CHECKPOINT_INTERVALS:
                yield
                self.checkpoint(watermark_ms=closed.end_ms, late=late)

    def ledger_slices(self, slices: dict[str, tuple[int, int]]) -> None:
        """The agents' slices of a unique feed (fleet/feedsplit.py), for ledger.csv."""
        if self.ledger is not None:
            self.ledger.ledger.assign(slices)

    def ledger_rows_lost(self, agent_id: str, in_flight: tuple[tuple[int, int], ...]) -> None:
        """A lost share's rows of a unique feed that it may have taken unreported."""
        if self.ledger is not None:
            self.ledger.ledger.lost(agent_id, in_flight)

    def ledger_handed(self, updated: dict[str, tuple[EngineShare, ...]]) -> None:
        """The rows of a unique feed the agents that took a lost share over hold now."""
        if self.ledger is not None:
            for agent_id, engines in updated.items():
                self.ledger.ledger.hand_on(agent_id, [r for e in engines for r in e.feed_added])

    def settle(self, agent_id: str, seq: int) -> None:
        """Settles an agent's message once the intervals closed so far are published."""
        self._publisher.settle(agent_id, seq)

    async def published(self) -> None:
        """Waits until every interval closed so far is published."""
        await self._publisher.drained()

    def agent_use(self, step: str, agent_id: str, scenario: str | None = None) -> tuple[int, int]:
        """The agent's requests in `step` in the intervals closed so far (published or on
        their way), and its busiest interval as published: of all its load, or of one
        scenario's share."""
        requests, busiest = self.meter.agent_use(step, agent_id, scenario)
        queued = (c for c in self._publisher.queued if c.step.name == step and not self.meter.has(step, c.start_ms))
        return requests + sum(c.requests_of(agent_id, scenario) for c in queued), busiest

    def checkpoint(self, *, watermark_ms: int, late: dict[str, int]) -> None:
        """The running totals on disk as of `watermark_ms` (the interval log starts over);
        the run's files made durable in the background."""
        if self._journal is None:
            return
        assert self.writer is not None  # start() and resume() open both
        self.writer.sync()
        self._journal.checkpoint(
            {
                "watermark_ms": watermark_ms,
                "offsets": to_doc(self.writer.offsets),
                "totals": self.totals.snapshot(),
                "meter": self.meter.snapshot(),
                "drift": self.drift.snapshot(),
                "thresholds": self.thresholds.snapshot(),
                "late": late,
            }
        )
        self._journal.sync()

    def record(self, record: JournalRecord) -> None:
        if self._journal is not None:
            self._journal.record(record)

    def event(self, event: Event) -> Event:
        """To every consumer of events; returns it as published. InfluxDB keeps one `event`
        point per (run, kind, time): two agents lost or two targets down in the same
        millisecond would be one, so a later one moves on by a millisecond."""
        last = self._event_times.get(event.kind)
        if last is not None and event.at_ms == last:
            event = replace(event, at_ms=last + 1)
        self._event_times[event.kind] = event.at_ms
        self._stream.event(event)
        return event

    def health(self, step: StepWindow, agent_id: str, health: Health, at_ms: int, engines: int) -> None:
        self._stream.health(step, agent_id, health, at_ms, engines)

    def host(self, step: StepWindow, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        self._stream.host(step, host, monitor, sample)

    def controller(self, sample: ControllerSample) -> None:
        self._stream.controller(sample)

    # ---- steps and the end --------------------------------------------------------

    def measure(
        self, spec: StepSpec, window: StepWindow, state: StepState, *, agents: int, demand_ratio: float, one_host: bool
    ) -> StepResult:
        """A step's figures, once every interval of it is published: the cluster's over its
        measured window, the generators' verdict and the monitored hosts."""
        loads = self.hosts.step_loads(window.name)
        result = replace(self.meter.result(spec, window, state), hosts=loads, bottleneck=find_bottleneck(loads))
        found = self.generators.verdict(window.name, agents, demand_ratio)
        if found.validity is not Validity.VALID or found.reasons:
            result = replace(
                result,
                validity=found.validity,
                validity_reasons=found.reasons_text(),
                invalid_intervals=found.invalid_intervals,
                suspect_intervals=found.suspect_intervals,
                generator_bound=found.bound,
                generator_bound_intervals=found.invalid_intervals,
                generator_advice=found.describe(window.name, one_host=one_host),
            )
        return result

    def step_end(self, window: StepWindow, result: StepResult, *, watermark_ms: int, late: dict[str, int]) -> None:
        self._stream.step_end(StepEnd(window, result))
        self.record(StepEnded(result))
        self.checkpoint(watermark_ms=watermark_ms, late=late)

    async def finish(self, summary: RunSummary, state: str) -> RunSummary:
        """The run has ended: summary.json and report.html (built in a thread: reading a long
        run's intervals takes seconds the event loop owes other runs), the journal closed, and
        the summary to every follower; returns it as published (with the files a full disk
        left incomplete, if any)."""
        if self.ledger is not None and self.ledger.ledger.assigned:
            summary = replace(summary, feed_rows={s.value: n for s, n in self.ledger.ledger.counts().items()})
        if self._output is not None:  # before the stream's end closes the sinks
            self._output.on_thresholds(summary.thresholds, at_ms=int(time.time() * 1000))
            self._output.on_feed_rows(summary.feed_rows, at_ms=int(time.time() * 1000))
        if self._journal is not None:
            self._stream.run_end()
            await self.disk.drained()  # the run directory's files whole before the report reads them
            told = self._with_disk(summary)
            written = rundir.write_summary(self.run_dir, told, self.trouble, report=False)
            if written:
                problem = await asyncio.to_thread(rundir.try_report, self.run_dir)
                written = rundir.report_written(self.run_dir, problem, self.trouble)
            if not written:
                told = self._with_disk(summary)  # followers hear of summary.json and report.html too
            summary = told
            self.record(RunEnded(state))
            self._journal.close()
        await self.disk.drained()  # the journal closed, and the followers have every update before the summary
        self.watchers.finish(summary)
        return summary

    def _incomplete(self, name: str) -> None:
        if self._journal is not None:
            self.record(FileIncomplete(name))

    def _with_disk(self, summary: RunSummary) -> RunSummary:
        if not self.trouble.incomplete:
            return summary
        return replace(
            summary,
            message="; ".join(filter(None, [summary.message, self.trouble.describe()])),
            incomplete_files=self.trouble.incomplete,
        )


def _settle_all(settle: Callable[[str, int], None], settles: list[tuple[str, int]]) -> None:
    for agent_id, seq in settles:
        settle(agent_id, seq)
