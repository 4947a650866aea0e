"""Data dropped from a spool, told to the user: the agents' spools (an agent sends a
`SpoolDrop` in its message sequence where the dropped messages would have been) and the
controller's InfluxDB spool (sinks/spool.py). Each becomes a `spool_dropped` event of the
run, saying how much and why; for an agent's reports, the run also stops waiting for them.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

from loadfleet.controller.model.events import Event, EventKind

# Agents whose last notice is remembered (to know a resend): the most recent ones. O(fleet).
TRACKED_AGENTS = 10_000


@dataclass(frozen=True)
class AgentSpoolDrop:
    """A stretch of an agent's messages of one job that its spool dropped (agent.proto)."""

    job_id: str
    messages: int
    reports: int = 0
    requests: int = 0
    first_interval_ms: int = 0  # every report from this interval to the last was dropped
    last_interval_ms: int = 0
    cause: str = ""


class NoticeLog:
    """The number (AgentMessage.seq) of each agent's last notice handled. An agent sends a
    notice again after reconnecting until it is acknowledged; numbers only grow, so one not
    above the last is a resend."""

    def __init__(self, capacity: int = TRACKED_AGENTS) -> None:
        self._last: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._capacity = capacity

    def first_time(self, agent_id: str, seq: int) -> bool:
        last = self._last.pop(agent_id, 0)
        self._last[agent_id] = max(last, seq)
        while len(self._last) > self._capacity:
            self._last.popitem(last=False)
        return seq > last


def agent_drop_event(agent_id: str, drop: AgentSpoolDrop) -> Event:
    text = f"agent {agent_id} dropped {drop.messages:,} unsent message(s) from its spool ({drop.cause})"
    if drop.reports:
        text += (
            f": {drop.reports:,} interval report(s), {_span(drop.first_interval_ms, drop.last_interval_ms)}, "
            f"holding {drop.requests:,} requests that no result shows"
        )
    return Event(EventKind.SPOOL_DROPPED, text + "; its newer measurements are kept", agent_id)


def influx_drop_event(points: int, total_points: int, cause: str) -> Event:
    return Event(
        EventKind.SPOOL_DROPPED,
        f"{points:,} InfluxDB points dropped from the controller's spool "
        f"({total_points:,} in all so far): {cause}; the run directory has every interval",
    )


def _span(first_ms: int, last_ms: int) -> str:
    first, last = _clock(first_ms), _clock(last_ms)
    return f"of {first}" if first == last else f"from {first} to {last}"


def _clock(at_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at_ms / 1000))
