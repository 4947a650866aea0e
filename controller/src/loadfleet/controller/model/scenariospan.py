"""When one scenario of a step sends load: its span (stream/contract.py's StepWindow holds one
per scenario; fleet/losses.py judges a lost share by it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScenarioSpan:
    """When one scenario of a step sends load (absolute ms, within the step's load), and its
    load in words."""

    name: str
    start_ms: int
    end_ms: int
    load: str

    def running(self, at_ms: int) -> bool:
        return self.start_ms <= at_ms < self.end_ms
