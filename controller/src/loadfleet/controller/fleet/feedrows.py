"""The rows of a unique feed a step's engines hold, and what becomes of a lost share's rows
(docs/plans.md "Test data").

Each engine holds its part of its agent's slice (feedsplit.py; the agent splits the slice the
same way) and then the blocks handed to it (`EngineShare.feed_added`), and takes them in that
order. The controller hears which rows each agent took from its reports as they arrive
(IntervalStats.feed_taken). When a share is lost, the rows its engines held and were not heard
taken split in two, in take order:

- *in flight*: the first ones, as many as it may have taken unreported: for each interval it
  may have run unreported, its agent's busiest interval's rows (before any report: a row per
  user and per arrival of an interval), as its requests are bounded (losses.py). They may have
  been used; nobody else gets them;
- *left*: the rest, which it cannot have taken. Under `redistribute` they are handed on with the
  share's load, split exactly over the engines that run it, each a contiguous part in order;
  otherwise they stay unused.

Bounds: the slices and the handed blocks are O(agents × engines × losses); the heard rows are
joined ranges, at most one per engine and block of an agent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loadfleet.controller.fleet.scheduler import EngineShare, users_of
from loadfleet.controller.model.load import Load, LoadModel
from loadfleet.controller.plan.feeds import Feed
from loadfleet.wire.feedranges import count_rows, join_ranges, split_rows

RowRanges = tuple[tuple[int, int], ...]  # rows of the file [start, end), in take order


@dataclass(frozen=True)
class LostRows:
    """A lost share's rows that were not heard taken: those it may have taken unreported, and
    the rest, in take order."""

    in_flight: RowRanges = ()
    left: RowRanges = ()


class FeedRows:
    """Who holds which rows of the step's unique feed, and which each agent was heard taking."""

    def __init__(self, feed: Feed, slices: dict[str, tuple[int, int]], interval_ms: int):
        self.feed = feed
        self._slices = dict(slices)  # agent -> its rows [start, end): O(agents)
        self._interval_ms = interval_ms
        self._heard: dict[str, list[tuple[int, int]]] = {}  # agent -> joined ranges
        self._busiest: dict[str, int] = {}  # agent -> most rows it reported in one interval

    def heard(self, agent_id: str, taken: Sequence[tuple[int, int]]) -> None:
        """The rows one report of the agent says it took (one interval of it)."""
        if taken:
            self._heard[agent_id] = join_ranges([*self._heard.get(agent_id, ()), *taken])
            self._busiest[agent_id] = max(self._busiest.get(agent_id, 0), count_rows(join_ranges(taken)))

    def held(self, agent_id: str, engines: tuple[EngineShare, ...], index: int) -> RowRanges:
        """Engine `index`'s rows, in the order it takes them."""
        start, end = self._slices.get(agent_id, (0, 0))
        own = split_rows(start, end, len(engines))[index]
        return (own, *engines[index].feed_added)

    def lose(self, agent_id: str, engines: tuple[EngineShare, ...], indices: Iterable[int], intervals: int) -> LostRows:
        """The rows of the agent's engines `indices` not heard taken, now lost; `intervals`:
        how many it may have run unreported."""
        heard = self._heard.get(agent_id, [])
        in_flight: list[tuple[int, int]] = []
        left: list[tuple[int, int]] = []
        for index in indices:
            per_interval = max(self._busiest.get(agent_id, 0), self._rows_per_interval(engines[index].load))
            maybe, rest = take_first(without(self.held(agent_id, engines, index), heard), per_interval * intervals)
            in_flight += maybe
            left += rest
        return LostRows(tuple(join_ranges(in_flight)), tuple(left))

    def _rows_per_interval(self, load: Load) -> int:
        """Rows a share may take in an interval before it reported any: one per user it can
        have, and one per arrival."""
        arrivals = load.peak if load.model is LoadModel.OPEN else 0
        return users_of(load) + math.ceil(arrivals * self._interval_ms / 1000)


def without(ranges: Iterable[tuple[int, int]], taken: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges`, in their order, less the rows in `taken` (joined ranges)."""
    rest = []
    for start, end in ranges:
        at = start
        for a, b in taken:
            if b <= at or a >= end:
                continue
            if a > at:
                rest.append((at, a))
            at = max(at, b)
        if at < end:
            rest.append((at, end))
    return rest


def take_first(ranges: Sequence[tuple[int, int]], rows: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The first `rows` rows of `ranges` (in their order), and the rest."""
    first, rest = [], []
    for start, end in ranges:
        cut = min(end, start + max(0, rows))
        if cut > start:
            first.append((start, cut))
        if end > cut:
            rest.append((cut, end))
        rows -= cut - start
    return first, rest


def split_in_order(ranges: Sequence[tuple[int, int]], parts: int) -> list[RowRanges]:
    """`ranges` cut into `parts` contiguous parts in their order, whose sizes differ by at most
    one row, the larger first (as split_rows cuts one range)."""
    out: list[RowRanges] = []
    rest = list(ranges)
    for lo, hi in split_rows(0, count_rows(rest), parts):
        part, rest = take_first(rest, hi - lo)
        out.append(tuple(part))
    return out
