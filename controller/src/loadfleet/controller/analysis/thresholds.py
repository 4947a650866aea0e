"""The plan's thresholds judged over the run's stream: live events when one starts failing or
holds again, a threshold's `abort` ending the run, and at the end each threshold's result
and the run's verdict (summary.json's `thresholds` and `verdict`; the CLI exits 4 when it
failed).

`ThresholdWatch` consumes `FinalInterval`s like the stop conditions (stops.py). Only measured
intervals count (warm-up and a sweep's final interval left out, as for steps). The scope's
row of an interval is the cluster's total, or the exact merge of its rows of one target or
one request (wire/stats.py), of every scenario or of one (`scenario`: an interval in which the
scenario has no rows is not its interval, so a scenario that never ran is judged by
`on_no_data`); each threshold folds it over the run, each step or a rolling
window (thresholdfolds.py) and reads its metric from that (thresholdvalues.py). An interval
judged invalid (its figures are the generators' limit, genbound.py) is left out of every
threshold and counted: when more than a tenth of the measured intervals were, a threshold
that did not fail is inconclusive.

Besides the plan's, the verdict's `require_success` adds "some response was ok": the run
fails when none of its measured intervals had an ok response (a dead target, or nothing
measured at all). It counts every measured interval, invalid ones too: an ok response is ok
whoever's limit the interval was.

State: O(thresholds × (1 + window)) tallies and O(steps) values, whatever the run's length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loadfleet.controller.analysis.stops import Condition, StopReason
from loadfleet.controller.analysis.thresholdfolds import Fold, fold_for
from loadfleet.controller.analysis.thresholdvalues import (
    Tally,
    check_stat,
    describe_number,
    describe_value,
    no_data_reason,
)
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.thresholdresult import Outcome, RunVerdict, ThresholdResult
from loadfleet.controller.model.verdict import Validity
from loadfleet.controller.plan.thresholds import Metric, NoData, OverKind, Threshold, VerdictRules
from loadfleet.controller.stream.contract import FinalInterval, StepEnd
from loadfleet.wire.stats import StatsRow, total_row

# The implicit threshold of `verdict.require_success`.
SOME_OK = Threshold(name="some response was ok", metric=Metric.OK, limit=0, below=False)
# More than this share of the measured intervals left out as invalid makes a threshold
# that did not fail inconclusive.
MAX_EXCLUDED_SHARE = 0.10


class _Watched:
    """One threshold's fold and live state."""

    def __init__(self, threshold: Threshold, fold: Fold, *, implicit: bool = False):
        check_stat(threshold)
        self.threshold = threshold
        self.fold = fold
        self.implicit = implicit
        self.failing = False
        self.first_failed_ms: int | None = None
        self.aborted = False

    @property
    def label(self) -> str:
        t = self.threshold
        return t.name if t.name == t.text else f"{t.name} ({t.text})"

    def live_text(self) -> str:
        """`312.4 ms (run so far, cluster)`."""
        over = self.threshold.over
        if over.kind is OverKind.WINDOW:
            span = f"last {over.window_s:g} s"
        elif over.kind is OverKind.STEP:
            span = f"step {self.fold.step} so far"
        else:
            span = "run so far"
        return f"{describe_value(self.threshold, self.fold.live_value)} ({span}, {self.threshold.scope})"

    def to_doc(self) -> dict[str, Any]:
        return {
            "fold": self.fold.to_doc(),
            "failing": self.failing,
            "first_failed_ms": self.first_failed_ms,
            "aborted": self.aborted,
        }

    def restore(self, doc: dict[str, Any]) -> None:
        self.fold.restore(doc["fold"])
        self.failing = doc["failing"]
        self.first_failed_ms = doc["first_failed_ms"]
        self.aborted = doc["aborted"]


class ThresholdWatch:
    """Consumes the run's published intervals; `emit` publishes its events, `on_stop` ends the
    run (the stop conditions' path) once a threshold with `abort` fails after its grace.
    `targets` maps the plan's target names to their URLs (rows are keyed by URL)."""

    def __init__(
        self,
        thresholds: Sequence[Threshold],
        rules: VerdictRules | None = None,
        *,
        interval_ms: int,
        targets: Mapping[str, str] | None = None,
        emit: Callable[[Event], object] = lambda event: None,
        on_stop: Callable[[StopReason], None] = lambda reason: None,
    ):
        self.rules = rules or VerdictRules()
        self._targets = dict(targets or {})
        self._emit = emit
        self._on_stop = on_stop
        self._watched = [_Watched(t, fold_for(t, interval_ms)) for t in thresholds]
        if self.rules.require_success:
            self._watched.append(_Watched(SOME_OK, fold_for(SOME_OK, interval_ms), implicit=True))
        self.measured_intervals = 0
        self.excluded_intervals = 0
        self.load_s = 0.0  # seconds of load published so far, warm-up included (an abort's grace)
        self.stopped = False
        # While a taken-over run folds in again what its journal logged: the events were
        # published before, and the run was stopped then if it was to be.
        self.quiet = False
        # Taken over from a checkpoint that held no thresholds (written by a controller from
        # before they were judged): only the intervals logged after it, and those since, count.
        self.partial = False

    # ---- the stream ---------------------------------------------------------------

    def on_interval(self, interval: FinalInterval) -> None:
        step = interval.step
        if interval.start_ms < step.load_end_ms:
            self.load_s += (min(interval.start_ms + interval.interval_ms, step.load_end_ms) - interval.start_ms) / 1000
        if not interval.measured:
            return
        seconds = (min(interval.start_ms + interval.interval_ms, step.measured_end_ms) - interval.start_ms) / 1000
        self.measured_intervals += 1
        excluded = interval.verdict.validity is Validity.INVALID
        self.excluded_intervals += excluded
        tallies: dict[tuple[str, str, str], Tally | None] = {}
        for watched in self._watched:
            if excluded and not watched.implicit:
                continue
            key = (watched.threshold.scenario, watched.threshold.target, watched.threshold.request)
            if key not in tallies:
                row = self._scope_row(interval, *key)
                tallies[key] = None if row is None else Tally.of(row, seconds)
            tally = tallies[key]
            if tally is not None:
                self._judge(watched, watched.fold.add(step.name, tally), interval)
        self.check_aborts(step.name)

    def on_step_end(self, end: StepEnd) -> None:
        for watched in self._watched:
            watched.fold.end_step()

    def on_run_end(self) -> None:
        pass

    def _scope_row(self, interval: FinalInterval, scenario: str, target: str, request: str) -> StatsRow | None:
        """The scope's row of the interval; None when the scope's scenario has no rows in it."""
        whole = interval.scenario_total(scenario) if scenario else interval.total
        if whole is None or (not target and not request):
            return whole
        url = self._targets.get(target, target)
        rows = [
            r
            for r in interval.cluster
            if (r.target == url if target else r.request == request) and (not scenario or r.scenario == scenario)
        ]
        return total_row(rows)

    # ---- live ---------------------------------------------------------------------

    def _judge(self, watched: _Watched, failing: bool | None, interval: FinalInterval) -> None:
        """The threshold's state after an interval: an event when it changed, and its abort."""
        if failing is None or failing == watched.failing:
            return
        watched.failing = failing
        if failing and watched.first_failed_ms is None:
            watched.first_failed_ms = interval.start_ms + interval.interval_ms
        if failing:
            self._event(EventKind.THRESHOLD_FAILING, f"threshold {watched.label} failing: {watched.live_text()}")
        else:
            self._event(EventKind.THRESHOLD_RECOVERED, f"threshold {watched.label} holds again: {watched.live_text()}")

    def check_aborts(self, step: str) -> None:
        """Ends the run once a failing threshold with `abort` is past its grace: after each
        measured interval, so one failing since before its grace ended aborts then."""
        if self.stopped:
            return
        for watched in self._watched:
            abort = watched.threshold.abort
            if abort is None or not watched.failing or self.load_s < abort.grace_s:
                continue
            self.stopped = watched.aborted = True
            text = f"threshold {watched.label} failed: {watched.live_text()} after {self.load_s:g} s of load"
            self._event(EventKind.THRESHOLD_ABORT, f"{text}; stopping the run")
            if not self.quiet:
                self._on_stop(StopReason(Condition.THRESHOLD, text, step=step))
            return

    def _event(self, kind: EventKind, text: str) -> None:
        if not self.quiet:
            self._emit(Event(kind, text))

    @property
    def failing_now(self) -> tuple[str, ...]:
        """The names of the thresholds failing as of the last interval (live followers)."""
        return tuple(w.threshold.name for w in self._watched if w.failing)

    # ---- the end ------------------------------------------------------------------

    def results(self) -> tuple[ThresholdResult, ...]:
        """Each threshold's result, in the plan's order, the implicit one last."""
        return tuple(self._result(w) for w in self._watched)

    def _result(self, watched: _Watched) -> ThresholdResult:
        t = watched.threshold
        found = watched.fold.judged()
        failed = found.failed or (not found.judged and t.on_no_data is NoData.FAIL)
        excluded = 0 if watched.implicit else self.excluded_intervals
        reason = ""
        if not found.judged or found.value is None:
            reason = no_data_reason(t) if failed else "no data"
        elif found.failing_steps and t.over.kind is not OverKind.RUN:
            reason = f"in step(s) {', '.join(found.failing_steps)}"
        outcome = Outcome.FAILED if failed else Outcome.PASSED
        if excluded and excluded > MAX_EXCLUDED_SHARE * self.measured_intervals and not watched.aborted:
            outcome = Outcome.INCONCLUSIVE
            reason = f"{excluded} of {self.measured_intervals} intervals were the generators' limit"
        if watched.aborted:
            reason = "; ".join(filter(None, [reason, "its abort ended the run"]))
        if self.partial:
            reason = "; ".join(filter(None, [reason, "judged from the intervals since the controller's restart only"]))
        return ThresholdResult(
            name=t.name,
            text=t.text,
            scope=t.scope,
            over=t.over.label,
            limit=t.limit,
            unit=t.unit,
            value=found.value,
            outcome=outcome,
            failing_steps=tuple(found.failing_steps) if t.over.kind is not OverKind.RUN else (),
            first_failed_ms=watched.first_failed_ms,
            aborted=watched.aborted,
            excluded_intervals=excluded,
            reason=reason,
        )

    def verdict(self, results: Sequence[ThresholdResult] | None = None) -> RunVerdict:
        """The run's verdict from the results (`results()` when not given): one sentence per
        threshold that failed it."""
        results = self.results() if results is None else results
        reasons = []
        for r in results:
            if r.outcome is Outcome.FAILED or (r.outcome is Outcome.INCONCLUSIVE and self.rules.inconclusive_fails):
                reasons.append(describe_result(r))
        return RunVerdict(passed=not reasons, reasons=tuple(reasons))

    # ---- a run taken over ---------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """JSON values to take the thresholds over after a restart (the run's checkpoint)."""
        return {
            "measured_intervals": self.measured_intervals,
            "excluded_intervals": self.excluded_intervals,
            "load_s": self.load_s,
            "stopped": self.stopped,
            "watched": [w.to_doc() for w in self._watched],
        }

    def restore(self, doc: dict[str, Any]) -> None:
        """As `snapshot` found it; ValueError when the plan's thresholds are not those it had."""
        if len(doc["watched"]) != len(self._watched):
            raise ValueError(
                f"the checkpoint holds {len(doc['watched'])} thresholds; the plan has {len(self._watched)}"
            )
        self.measured_intervals = doc["measured_intervals"]
        self.excluded_intervals = doc["excluded_intervals"]
        self.load_s = doc["load_s"]
        self.stopped = doc["stopped"]
        for watched, held in zip(self._watched, doc["watched"]):
            watched.restore(held)


def describe_result(result: ThresholdResult) -> str:
    """`p99 latency < 250 ms failed: 312.4 ms (run, cluster)`: the verdict's sentence."""
    label = result.name if result.name == result.text else f"{result.name} ({result.text})"
    if result.outcome is Outcome.INCONCLUSIVE:
        return f"{label} inconclusive: {result.reason} ({result.over}, {result.scope})"
    if result.value is None:
        found = result.reason
    else:
        found = ", ".join(filter(None, [describe_number(result.value, result.unit), result.reason]))
    return f"{label} {result.outcome.value}: {found} ({result.over}, {result.scope})"
