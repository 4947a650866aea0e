"""Running totals of a run: every published interval folded in, for the summary.

Kept per (target, request) over the cluster and per agent: O(targets × requests +
agents), whatever the run's length. Each step also keeps the span of intervals that hold
data (for the seconds the run measured), O(steps). With very many agents
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


@dataclass
class RunTotals:
    by_key: dict[RowKey, StatsRow] = field(default_factory=dict)
    by_agent: dict[str, StatsRow] = field(default_factory=dict)
    spans: dict[str, _Span] = field(default_factory=dict)  # step name -> its span

    def on_interval(self, interval: FinalInterval) -> None:
        for row in interval.cluster:
            self._fold(self.by_key, row.key, row)
        for agent in interval.agents:
            self._fold(self.by_agent, agent.agent_id, agent.total, histogram=interval.step.agent_detail)
        step = interval.step
        if interval.total.requests and step.load_start_ms <= interval.start_ms < step.load_end_ms:
            span = self.spans.setdefault(step.name, _Span(interval_ms=step.interval_ms))
            span.first_ms = interval.start_ms if span.first_ms is None else span.first_ms
            span.last_ms = interval.start_ms
            span.load_end_ms = step.load_end_ms

    def on_step_end(self, end: StepEnd) -> None:
        span = self.spans.get(end.step.name)
        if span:  # a step stopped early ends where it was stopped
            span.load_end_ms = end.step.load_end_ms

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
        }

    @classmethod
    def restore(cls, doc: dict[str, Any]) -> RunTotals:
        rows = [row_from_doc(r) for r in doc["by_key"]]
        return cls(
            by_key={r.key: r for r in rows},
            by_agent={a: row_from_doc(r) for a, r in doc["by_agent"].items()},
            spans={name: from_doc(_Span, span) for name, span in doc["spans"].items()},
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
