"""A plan's sweep: the levels of load its steps run, how long, how often, on how many servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sweep:
    levels: tuple[float, ...]
    step_s: float
    warmup_s: float = 0.0
    repeat: int = 1
    servers: tuple[int, ...] = ()  # empty: every target in every step
    stop_at_knee: bool = False
    # Per level, the users model's spawn rate for that step (a [users, spawn_rate] step);
    # 0: the plan's load.spawn_rate. Empty: every step uses the plan's.
    spawn_rates: tuple[float, ...] = ()
    # The scenario whose level the steps set (plan `scenarios:`); "": the plan's only one
    # (the implicit one of a plain plan, or a plan's single declared scenario).
    scenario: str = ""

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> Sweep | None:
        if not doc:
            return None
        steps = doc["steps"]
        rates = tuple(float(v[1]) if isinstance(v, list) else 0.0 for v in steps)
        return cls(
            levels=tuple(float(v[0] if isinstance(v, list) else v) for v in steps),
            step_s=float(doc["step_s"]),
            warmup_s=float(doc.get("warmup_s", 0)),
            repeat=doc.get("repeat", 1),
            servers=tuple(doc.get("servers", ())),
            stop_at_knee=doc.get("stop_at_knee", False),
            spawn_rates=rates if any(rates) else (),
            scenario=doc.get("scenario", ""),
        )

    def spawn_rate(self, level_index: int) -> float:
        """The spawn rate of the level at this 1-based position (0: the plan's)."""
        return self.spawn_rates[level_index - 1] if self.spawn_rates else 0.0

    def to_doc(self) -> dict[str, Any]:
        steps = [
            [_number(v), _number(rate)] if rate else _number(v)
            for v, rate in zip(self.levels, self.spawn_rates or (0.0,) * len(self.levels))
        ]
        doc: dict[str, Any] = {"steps": steps, "step_s": self.step_s, "warmup_s": self.warmup_s, "repeat": self.repeat}
        if self.servers:
            doc["servers"] = list(self.servers)
        if self.stop_at_knee:
            doc["stop_at_knee"] = True
        if self.scenario:
            doc["scenario"] = self.scenario
        return doc

    @property
    def total_steps(self) -> int:
        return len(self.levels) * self.repeat * max(1, len(self.servers))


def _number(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v
