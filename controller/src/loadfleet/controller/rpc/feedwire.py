"""A plan's feed as the agents get it (JobSpec.feed): a unique feed's slice, or every row."""

from __future__ import annotations

from loadfleet.controller.plan.feeds import Feed, FeedMode, OnExhausted
from loadfleet.v1 import job_pb2

_FEED_MODES = {
    FeedMode.UNIQUE: job_pb2.FEED_MODE_UNIQUE,
    FeedMode.CIRCULAR: job_pb2.FEED_MODE_CIRCULAR,
    FeedMode.RANDOM: job_pb2.FEED_MODE_RANDOM,
}
_ON_EXHAUSTED = {
    OnExhausted.STOP_USER: job_pb2.FEED_EXHAUSTED_STOP_USER,
    OnExhausted.STOP_RUN: job_pb2.FEED_EXHAUSTED_STOP_RUN,
    OnExhausted.WRAP: job_pb2.FEED_EXHAUSTED_WRAP,
}


def add_feed(spec: job_pb2.JobSpec, feed: Feed | None, rows: tuple[int, int]) -> None:
    """Gives `spec` the plan's feed, if it has one (an agent's slice `rows` of a unique one)."""
    if feed is not None:
        spec.feed.CopyFrom(feed_to_proto(feed, rows))


def feed_blocks(feed: Feed, ranges: tuple[tuple[int, int], ...]) -> list[job_pb2.FeedBlock]:
    """The rows of `feed` in `ranges` (handed to an engine after a loss), with their cells."""
    return [
        job_pb2.FeedBlock(first_row=start, rows=[job_pb2.FeedRow(cells=row) for row in feed.rows[start:end]])
        for start, end in ranges
    ]


def feed_to_proto(feed: Feed, rows: tuple[int, int]) -> job_pb2.FeedSpec:
    """The feed an agent gets: a unique feed's slice `rows` of the file, or every row."""
    start, end = rows if feed.mode is FeedMode.UNIQUE else (0, len(feed.rows))
    return job_pb2.FeedSpec(
        name=feed.name,
        columns=feed.columns,
        mode=_FEED_MODES[feed.mode],
        on_exhausted=_ON_EXHAUSTED[feed.on_exhausted],
        first_row=start,
        rows=[job_pb2.FeedRow(cells=row) for row in feed.rows[start:end]],
        file_rows=len(feed.rows),
    )
