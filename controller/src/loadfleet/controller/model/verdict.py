"""Verdicts on an interval's figures: valid, suspect or invalid, and the reasons (the rules
that give them are in analysis/validity.py).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Validity(enum.StrEnum):
    """Ordered by `rank`: the worst of several verdicts is the one of highest rank."""

    VALID = "valid"
    SUSPECT = "suspect"
    INVALID = "invalid"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    @property
    def label(self) -> str:
        return self.value


_RANKS = {Validity.VALID: 0, Validity.SUSPECT: 1, Validity.INVALID: 2}


def worst(validities: Iterable[Validity]) -> Validity:
    return max(validities, key=lambda v: v.rank, default=Validity.VALID)


class Signal(enum.StrEnum):
    HOST_CPU = "host_cpu"
    ENGINE_CPU = "engine_cpu"
    ENGINE_WAIT = "engine_wait"
    LOOP_LAG = "loop_lag"
    FDS = "fds"
    PORTS = "ports"
    LOCAL_ERRORS = "local_errors"
    SEND_LAG = "send_lag"
    SEND_LAG_SHARE = "send_lag_share"  # the mean send lag against the mean latency (open model)
    # Not a generator's: the target failed (fewer than 1 % ok, the failures its own), and the
    # generators were not judged (analysis/validity.py).
    TARGET_FAILED = "target_failed"


@dataclass(frozen=True)
class Reason:
    signal: Signal
    validity: Validity
    agent: str
    text: str

    def describe(self) -> str:
        return f"{self.agent}: {self.text}" if self.agent else self.text


@dataclass(frozen=True)
class Verdict:
    validity: Validity = Validity.VALID
    reasons: tuple[Reason, ...] = ()

    @property
    def valid(self) -> bool:
        return self.validity is Validity.VALID

    def describe(self) -> str:
        """e.g. `invalid: a1: engine at 97 % of its core; a2: host CPU 95 %`; `valid`."""
        return self.validity.label + (": " + self.reasons_text() if self.reasons else "")

    def reasons_text(self) -> str:
        return reasons_text(self.reasons)

    def for_agent(self, agent: str) -> Verdict:
        return verdict_of(tuple(r for r in self.reasons if r.agent == agent))

    def by_agent(self) -> dict[str, Verdict]:
        """Each named agent's own verdict, in one pass (agents not named are valid)."""
        grouped: dict[str, list[Reason]] = {}
        for r in self.reasons:
            grouped.setdefault(r.agent, []).append(r)
        return {agent: verdict_of(tuple(rs)) for agent, rs in grouped.items()}


# Reasons spelled out in one text; a fleet of a thousand busy agents gets the worst few and a count.
MAX_REASONS_TEXT = 10


def reasons_text(reasons: tuple[Reason, ...]) -> str:
    """`a1: engine at 97 % of its core; a2: host CPU 95 %`, the worst first when there are
    more than MAX_REASONS_TEXT (then `...; and 990 more`)."""
    if len(reasons) <= MAX_REASONS_TEXT:
        return "; ".join(r.describe() for r in reasons)
    shown = sorted(reasons, key=lambda r: -r.validity.rank)[:MAX_REASONS_TEXT]
    return "; ".join(r.describe() for r in shown) + f"; and {len(reasons) - MAX_REASONS_TEXT} more"


VALID = Verdict()


def verdict_of(reasons: tuple[Reason, ...]) -> Verdict:
    """The verdict of these reasons: the worst of them, VALID when there are none."""
    return Verdict(worst(r.validity for r in reasons), reasons)
