"""Which rows of a unique feed each agent holds: the file's rows split over every engine slot
of the step at once, as a budget is (`load.split_exact` with equal weights: whole numbers
that add up to the file), each agent's engines holding one contiguous slice. Its agent splits
that slice over its engines the same way (agent job.py, `loadfleet.wire.feedranges`)."""

from __future__ import annotations

from loadfleet.controller.fleet.scheduler import AgentShare
from loadfleet.controller.plan.feeds import Feed, FeedMode
from loadfleet.wire.feedranges import split_rows


def feed_slices(feed: Feed | None, shares: list[AgentShare]) -> dict[str, tuple[int, int]]:
    """agent id -> its rows [start, end) of a unique feed; empty without one. O(agents)."""
    if feed is None or feed.mode is not FeedMode.UNIQUE or not shares:
        return {}
    engines = [len(share.engines) for share in shares]
    per_engine = split_rows(0, len(feed.rows), sum(engines))
    slices = {}
    first = 0
    for share, count in zip(shares, engines):
        mine = per_engine[first : first + count]
        slices[share.agent_id] = (mine[0][0], mine[-1][1])
        first += count
    return slices
