"""What the evaluator reads and the errors it raises: an `Observation` (one step, interval or
run of a stored run), a figure's value per cell (`CellSet`), and how values compare (numbers
within EPSILON, names without case). Pure values, no I/O; evaluate.py computes metrics over them."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

EPSILON = 1e-9


class Grain(enum.Enum):
    """What an observation's figures are over."""

    STEP = "step"  # a step's measured intervals
    INTERVAL = "interval"  # one interval of a run's time series
    RUN = "run"  # the whole run


@dataclass(frozen=True)
class Observation:
    vars: Mapping[str, object]  # str or float values
    figures: Mapping[str, float]
    pass_no: int = 1
    run_id: str = ""
    left_out: str = ""  # why the step's figures are not used ("" = they are)
    grain: Grain = Grain.STEP
    invalid: str = ""  # loadfleet marked the step invalid (why): excluded, and counted in the verdict
    fails_cell: str = ""  # the step measured nothing under load (why): its cell fails, not "left out"

    @property
    def usable(self) -> bool:
        return not (self.left_out or self.invalid or self.fails_cell)


class NotEvaluable(Exception):
    """The runs lack something the metric needs; the message says what."""


class EmptySelection(NotEvaluable):
    """No observation matches a selector (a level `@ each` may skip)."""


class CellFails(Exception):
    """A cell the metric reads had a step that measured no request while load was offered (a
    server that stopped answering): the finding fails on it, it is not silently left out."""


@dataclass(frozen=True)
class CellSet:
    """A figure's value per cell: ((vars as sorted pairs, value), ...)."""

    cells: tuple
    label: str

    def scalar(self) -> float:
        if not self.cells:
            raise EmptySelection(f"no cell for {self.label}")
        if len(self.cells) > 1:
            open_vars = sorted(
                {
                    k
                    for key, _ in self.cells
                    for k, v in key
                    if len({dict(c)[k] for c, _ in self.cells if k in dict(c)}) > 1
                }
            )
            raise NotEvaluable(
                f"{self.label} leaves {len(self.cells)} cells open (they differ in "
                f"{', '.join(open_vars)}); the metric must fix them"
            )
        return self.cells[0][1]


def number(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def same(a, b) -> bool:
    na, nb = number(a), number(b)
    if na is not None and nb is not None:
        return abs(na - nb) < EPSILON
    return str(a).lower() == str(b).lower()


def within(value, low, high) -> bool:
    nv, nl, nh = number(value), number(low), number(high)
    if None not in (nv, nl, nh):
        return nl - EPSILON <= nv <= nh + EPSILON
    text, low_s, high_s = str(value).lower(), str(low).lower(), str(high).lower()
    return len(text) == len(low_s) == len(high_s) and low_s <= text <= high_s


def fmt(value) -> str:
    numeric = number(value)
    if numeric is None:
        return str(value)
    return str(int(numeric)) if numeric.is_integer() else f"{numeric:g}"
