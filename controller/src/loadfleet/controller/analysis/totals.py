"""Running totals of a run: every published interval folded in, for the summary.

Kept per (target, request) over the cluster and per agent: O(targets × requests +
agents), whatever the run's length. Each step also keeps the span of intervals that hold
data (for the seconds the run measured), O(steps). In a run with scenarios each scenario
has its folded `*`/`*` row and the seconds of intervals in which it had rows, step by step
(O(scenarios)). With very many agents
(`StepWindow.agent_detail` off) an agent's total is its counts only, without latency:
merging a thousand agents' histograms each interval would cost more than everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadfleet.controller.model.codec import from_doc, row_from_doc, row_to_doc, to_doc
from loadfleet.controller.stream.contract import FinalInterval, StepEnd
from loadfleet.wire.stats import TOTAL, RowKey, StatsRow, merge_rows, total_row


@dataclass
class _Span:
    """A step's intervals with data: from the first to the last, within its load."""

    first_ms: int | None = None
    last_ms: int = 0
    load_end_ms: int = 0
    interval_ms: int = 0

    @property
    def seconds(self) -> float:
        if self.first_ms is None:
            return 0.0
        return (min(self.last_ms + self.interval_ms, self.load_end_ms) - self.first_ms) / 1000

    def extend(self, interval: FinalInterval) -> None:
        step = interval.step
        self.first_ms = interval.start_ms if self.first_ms is None else self.first_ms
        self.last_ms = interval.start_ms
        self.load_end_ms = step.load_end_ms


@dataclass
class _ScenarioTotal:
    """A scenario's folded row, and its seconds with rows: of the steps before, and its span
    in the step of its last rows."""

    row: StatsRow
    step: str = ""
    earlier_s: float = 0.0
    span: _Span = field(default_factory=_Span)

    @property
    def seconds(self) -> float:
        return self.earlier_s + self.span.seconds

    def add(self, total: StatsRow, interval: FinalInterval) -> None:
        self.row.add(total)
        step = interval.step
        if not (total.requests and step.load_start_ms <= interval.start_ms < step.load_end_ms):
            return
        if step.name != self.step:
            self.earlier_s, self.step = self.seconds, step.name
            self.span = _Span(interval_ms=step.interval_ms)
        self.span.extend(interval)


@dataclass
class RunTotals:
    by_key: dict[RowKey, StatsRow] = field(default_factory=dict)
    by_agent: dict[str, StatsRow] = field(default_factory=dict)
    spans: dict[str, _Span] = field(default_factory=dict)  # step name -> its span
    # scenario -> its totals; empty in a plain run. At most MAX_SCENARIOS (plan/scenarios.py).
    scenarios: dict[str, _ScenarioTotal] = field(default_factory=dict)

    def on_interval(self, interval: FinalInterval) -> None:
        for row in interval.cluster:
            self._fold(self.by_key, row.key, row)
        for agent in interval.agents:
            self._fold(self.by_agent, agent.agent_id, agent.total, histogram=interval.step.agent_detail)
        for total in interval.scenario_totals:
            held = self.scenarios.get(total.scenario)
            if held is None:
                held = self.scenarios[total.scenario] = _ScenarioTotal(StatsRow(TOTAL, TOTAL, scenario=total.scenario))
            held.add(total, interval)
        step = interval.step
        if interval.total.requests and step.load_start_ms <= interval.start_ms < step.load_end_ms:
            self.spans.setdefault(step.name, _Span(interval_ms=step.interval_ms)).extend(interval)

    def on_step_end(self, end: StepEnd) -> None:
        span = self.spans.get(end.step.name)
        if span:  # a step stopped early ends where it was stopped
            span.load_end_ms = end.step.load_end_ms
        for held in self.scenarios.values():
            if held.step == end.step.name:
                held.span.load_end_ms = end.step.load_end_ms

    def on_run_end(self) -> None:
        pass

    @staticmethod
    def _fold(into: dict[Any, StatsRow], key: str | RowKey, row: StatsRow, *, histogram: bool = True) -> None:
        held = into.get(key)
        if held is None:
            held = into[key] = (
                StatsRow(TOTAL, TOTAL) if isinstance(key, str) else StatsRow(key[1], key[2], scenario=key[0])
            )
        if histogram:
            held.add(row)
        else:
            held.add_counts(row)
            held.latency_missing = True

    def snapshot(self) -> dict[str, Any]:
        """JSON values to take the totals over after a restart (journal.py)."""
        return {
            "by_key": [row_to_doc(r) for r in self.by_key.values()],
            "by_agent": {a: row_to_doc(r) for a, r in self.by_agent.items()},
            "spans": {name: to_doc(span) for name, span in self.spans.items()},
            **({"scenarios": [to_doc(held) for held in self.scenarios.values()]} if self.scenarios else {}),
        }

    @classmethod
    def restore(cls, doc: dict[str, Any]) -> RunTotals:
        rows = [row_from_doc(r) for r in doc["by_key"]]
        return cls(
            by_key={r.key: r for r in rows},
            by_agent={a: row_from_doc(r) for a, r in doc["by_agent"].items()},
            spans={name: from_doc(_Span, span) for name, span in doc["spans"].items()},
            scenarios={
                held.row.scenario: held for held in (from_doc(_ScenarioTotal, h) for h in doc.get("scenarios", []))
            },
        )

    @property
    def measured_s(self) -> float:
        """Seconds covered by intervals with data, step by step (the planned duration for a
        full run; less when stopped early)."""
        return sum(span.seconds for span in self.spans.values())

    @property
    def has_data(self) -> bool:
        return bool(self.spans)

    def total(self) -> StatsRow:
        return total_row(self.by_key.values())

    def by_target(self) -> dict[str, StatsRow]:
        return {t: row for (_, t, _), row in merge_rows(self.by_key.values(), request=TOTAL).items()}

    def by_request(self) -> dict[str, StatsRow]:
        return {r: row for (_, _, r), row in merge_rows(self.by_key.values(), target=TOTAL).items()}

    def scenario_rows(self, scenario: str) -> list[StatsRow]:
        """The scenario's rows per (target, request)."""
        return [row for (s, _, _), row in self.by_key.items() if s == scenario]
