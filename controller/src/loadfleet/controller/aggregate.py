"""Exact per-interval aggregation of agents' reports into cluster intervals.

Each agent sends one report per interval. An interval is published when every agent
still expected has reported it, or when its grace period has passed; a report that
arrives after publication still counts: the interval is merged again and published
as revised (same interval, new figures). Nothing is averaged: counts add, histograms
merge (`loadfleet.wire.stats`).
"""
from __future__ import annotations

from collections.abc import Iterable

from loadfleet.wire.stats import StatsRow, merge_rows

TOTAL = "*"  # target/request name of rows that merge all targets or all requests


class RunAggregator:
    def __init__(self, expected_agents: Iterable[str]):
        self._expected = set(expected_agents)
        self._reports: dict[int, dict[str, list[StatsRow]]] = {}
        self._published: set[int] = set()

    def add(self, agent_id: str, interval_start_ms: int, rows: list[StatsRow]) -> bool:
        """Stores an agent's report (a resend replaces the earlier one).

        Returns True when the interval had already been published and so changes.
        """
        self._reports.setdefault(interval_start_ms, {})[agent_id] = rows
        return interval_start_ms in self._published

    def expect(self, agent_ids: Iterable[str]) -> None:
        """From now on wait for these agents (a new step of the run)."""
        self._expected = set(agent_ids)

    def drop_agent(self, agent_id: str) -> None:
        """The agent is lost: stop waiting for its reports (those received stay)."""
        self._expected.discard(agent_id)

    def due(self, now_ms: int, interval_ms: int, grace_ms: int) -> list[int]:
        """Intervals to publish now, oldest first; each is returned once."""
        due = []
        for start in sorted(self._reports):
            if start in self._published:
                continue
            complete = self._expected <= self._reports[start].keys()
            if complete or now_ms >= start + interval_ms + grace_ms:
                self._published.add(start)
                due.append(start)
        return due

    def intervals(self) -> list[int]:
        return sorted(self._reports)

    def agents_in(self, interval_start_ms: int) -> list[str]:
        return sorted(self._reports.get(interval_start_ms, {}))

    def agent_rows(self, interval_start_ms: int, agent_id: str) -> list[StatsRow]:
        return self._reports.get(interval_start_ms, {}).get(agent_id, [])

    def rows_in(self, interval_start_ms: int) -> list[StatsRow]:
        """Every agent's rows of one interval (not merged)."""
        return list(self._all_rows([interval_start_ms]))

    def cluster_total(self, interval_start_ms: int) -> StatsRow:
        return self._total(self._all_rows([interval_start_ms]))

    def run_total(self, *, target: str | None = None, request: str | None = None,
                  agent_id: str | None = None) -> dict[tuple[str, str], StatsRow]:
        """Rows over the whole run, merged as asked (see `merge_rows`)."""
        return merge_rows(self._all_rows(self.intervals(), agent_id), target=target, request=request)

    def _all_rows(self, starts: Iterable[int], agent_id: str | None = None) -> Iterable[StatsRow]:
        for start in starts:
            for agent, rows in self._reports.get(start, {}).items():
                if agent_id is None or agent == agent_id:
                    yield from rows

    @staticmethod
    def _total(rows: Iterable[StatsRow]) -> StatsRow:
        merged = merge_rows(rows, target=TOTAL, request=TOTAL)
        return merged.get((TOTAL, TOTAL), StatsRow(TOTAL, TOTAL))
