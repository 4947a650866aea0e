"""Arithmetic over a figure's cells (evaluate.py's functions of findings.yaml's vocabulary):
ratios, growth, slope, onset, max and mean over cells. Pure functions."""

from __future__ import annotations

from collections import defaultdict

from .metric import Call
from .observation import EPSILON, CellSet, EmptySelection, NotEvaluable, fmt, number, same


def cell_var(key, name):
    value = dict(key).get(name)
    if number(value) is None:
        raise NotEvaluable(f"variable {name!r} is not a number in every cell")
    return number(value)


def scalar_of(value):
    return value.scalar() if isinstance(value, CellSet) else value


def arith(op: str, a, b) -> float:
    a, b = scalar_of(a), scalar_of(b)
    if op == "*":
        return a * b
    if abs(b) < EPSILON:
        raise NotEvaluable("division by 0")
    return a / b


def only(cells: CellSet, var: str, level) -> float:
    matching = [(k, v) for k, v in cells.cells if var in dict(k) and same(dict(k)[var], level)]
    if not matching:
        raise NotEvaluable(f"no run with {var}={fmt(level)} for {cells.label}")
    return CellSet(tuple(matching), f"{cells.label} at {var}={fmt(level)}").scalar()


def by_level(cells: CellSet, over: str | None) -> dict:
    if not over:
        raise NotEvaluable("the function needs over=VAR")
    levels = defaultdict(list)
    for key, value in cells.cells:
        if over not in dict(key):
            raise NotEvaluable(f"no variable {over!r} in the runs ({cells.label})")
        levels[dict(key)[over]].append((key, value))
    return {
        level: CellSet(tuple(group), f"{cells.label} at {over}={fmt(level)}").scalar()
        for level, group in levels.items()
    }


def of_cells(node: Call, cells: CellSet):
    """max, mean: over the cells; growth: the cell at one level of a variable over the one at another."""
    if node.fn in ("max", "mean"):
        if not cells.cells:
            raise EmptySelection(f"no cell for {cells.label}")
        values = [v for _, v in cells.cells]
        return max(values) if node.fn == "max" else sum(values) / len(values)
    ((var, (start, end)),) = dict(node.kwargs).items()
    at = {lvl: only(cells, var, lvl) for lvl in (start, end)}
    if abs(at[start]) < EPSILON:
        raise NotEvaluable(f"growth: {cells.label} is 0 at {var}={fmt(start)}")
    return at[end] / at[start]


def onset(numeric: dict, label: str, over) -> float:
    """The first level whose value exceeds twice the value at the lowest level."""
    xs = sorted(numeric)
    base = numeric[xs[0]]
    for x in xs[1:]:
        if numeric[x] > 2 * base:
            return x
    raise NotEvaluable(f"no onset: {label} never exceeds twice its value at {over}={fmt(xs[0])}")


def slope(points: dict) -> float:
    n = len(points)
    mean_x = sum(points) / n
    mean_y = sum(points.values()) / n
    sxx = sum((x - mean_x) ** 2 for x in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points.items()) / sxx
