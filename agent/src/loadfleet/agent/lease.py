"""The agent's lease: the controller's permission to keep producing load.

Every message from the controller renews it. When it runs out the agent stops all
load at once, whatever it was doing: a generator must never outlive its controller.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Lease:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._expires_at: float | None = None

    def renew(self, lease_ms: int) -> None:
        self._expires_at = self._clock() + lease_ms / 1000

    def expired(self) -> bool:
        """True once a granted lease has run out; False before any lease was granted."""
        return self._expires_at is not None and self._clock() >= self._expires_at

    def remaining_s(self) -> float:
        return 0.0 if self._expires_at is None else max(0.0, self._expires_at - self._clock())
