"""Where a run's measurements go besides the run directory.

A `Sink` takes points and must never block the run: `add` only queues. `close`
flushes what it can within its own deadline and says what it could not. A sink that may
have to drop points (a bounded spool) says how many: `DropCounting`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from loadfleet.controller.output.sinks.lineproto import Point
from loadfleet.controller.output.sinks.spool import Dropped


class Sink(Protocol):
    def add(self, points: list[Point]) -> None:
        """Queues points; never blocks and never raises for a slow or absent backend."""

    async def close(self) -> str:
        """Flushes and stops; returns a one-line account (e.g. what stays spooled)."""


@runtime_checkable
class DropCounting(Protocol):
    def dropped(self) -> Dropped:
        """The points dropped since the sink started (cumulative), and why the latest went."""
