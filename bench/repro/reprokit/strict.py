"""The strict evaluator's bookkeeping (issue 34): which steps a metric's figures read and which of
them loadfleet marked invalid (excluded, and counted in the verdict's text), and the rule that a
figure over a client sweep needs every level of it. evaluate.py applies them."""

from __future__ import annotations

from dataclasses import dataclass, field

from .metric import Fig
from .observation import NotEvaluable, Observation

MAX_REASONS_SHOWN = 2  # distinct reasons for invalid steps quoted in a verdict (the tables list every step)


@dataclass
class Scrutiny:
    """The steps a metric's figures read, the invalid ones among them (excluded), for the verdict's text."""

    read: set = field(default_factory=set)  # every step a figure selected (by id)
    invalid: set = field(default_factory=set)  # those loadfleet marked invalid
    invalid_reasons: set = field(default_factory=set)
    # Used steps whose engine was killed after the window with requests in flight: their figures
    # are the window's, but those requests' outcomes are in no figure (not even the run's totals).
    lost_after: set = field(default_factory=set)

    def text(self) -> str:
        parts = []
        if self.invalid:
            shown = sorted(self.invalid_reasons)[:MAX_REASONS_SHOWN]
            more = len(self.invalid_reasons) - len(shown)
            reasons = "; ".join(shown) + (f"; {more} more" if more > 0 else "")
            parts.append(f"{len(self.invalid)} of {len(self.read)} steps invalid, excluded ({reasons})")
        if self.lost_after:
            parts.append(
                f"{len(self.lost_after)} of {len(self.read)} steps lost an engine after their window "
                "(its requests then in flight are in no figure)"
            )
        return "; ".join(parts)


def whole_sweeps(fig: Fig, everything: list[Observation], usable: list[Observation]) -> None:
    """A figure over a client sweep needs every level of it: an average or peak over the levels left
    when some are invalid would compare sweeps of different clients (NotEvaluable instead)."""

    def levels(observations):
        return {tuple(sorted((k, str(v)) for k, v in o.vars.items())) for o in observations}

    missing = levels(everything) - levels(usable)
    if missing:
        where = "; ".join(", ".join(f"{k}={v}" for k, v in key) for key in sorted(missing))
        raise NotEvaluable(f"{fig.text()} is over a client sweep, and only invalid steps ran at {where}")
