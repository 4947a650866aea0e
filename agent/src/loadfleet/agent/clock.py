"""The controller's clock against this agent's, estimated the way NTP does.

Every heartbeat carries the agent's clock; the lease renewal that answers it carries that
reading back with the controller's clock when it answered. If the message took as long
each way, the controller's clock at the midpoint of the round trip was its reading, so

    offset = controller_at − (sent_at + received_at) / 2

and the error is at most half the round trip. Of the last `SAMPLES` round trips the one
with the shortest time is trusted: a round trip slowed by a queue says least.

A job's barrier and interval times are the controller's: the agent converts them into its own
clock with the offset as it was when the job was assigned, and its reports back (job.py), so an
agent whose clock is seconds off still starts with the others and reports on their grid.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

# Round trips remembered (one per heartbeat: about half a minute of them).
SAMPLES = 32


@dataclass(frozen=True)
class ClockSample:
    offset_ms: int  # the controller's clock minus the agent's
    rtt_ms: int


class ClockEstimate:
    """O(SAMPLES)."""

    def __init__(self) -> None:
        self._samples: collections.deque[ClockSample] = collections.deque(maxlen=SAMPLES)

    def add(self, sent_at_ms: int, controller_at_ms: int, received_at_ms: int) -> None:
        """A round trip: the agent's clock when it sent and when it got the answer, and the
        controller's when it answered. One that ends before it starts (the agent's clock was
        set back meanwhile) says nothing."""
        if sent_at_ms <= 0 or received_at_ms < sent_at_ms:
            return
        midpoint = (sent_at_ms + received_at_ms) / 2
        self._samples.append(ClockSample(round(controller_at_ms - midpoint), received_at_ms - sent_at_ms))

    @property
    def best(self) -> ClockSample | None:
        """The sample of the shortest round trip, None before the first."""
        return min(self._samples, key=lambda s: s.rtt_ms, default=None)

    @property
    def offset_ms(self) -> int:
        """The best estimate, 0 before the first round trip."""
        best = self.best
        return best.offset_ms if best else 0


def wall_ms() -> int:
    """This host's clock, in ms since the epoch."""
    return int(time.time() * 1000)
