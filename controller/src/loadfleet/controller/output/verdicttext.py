"""The words both CI outputs (junit.py, markdown.py) say about a threshold's result and a gated
figure, so that a JUnit failure message and a Markdown table cell read the same."""

from __future__ import annotations

from loadfleet.controller.model.gateresult import GateFigure
from loadfleet.controller.model.thresholdresult import ThresholdResult

NO_VALUE = "n/a"  # a figure a run did not measure (the latency of nothing)


def number(value: float | None, unit: str = "", *, signed: bool = False) -> str:
    """`value` in its unit, as many digits as a reader compares: 12,346 · 312.4 · 0.94."""
    if value is None:
        return NO_VALUE
    size = abs(value)
    digits = f"{value:,.0f}" if size >= 1000 else f"{value:.1f}" if size >= 10 else f"{value:.3g}"
    if signed and value > 0:
        digits = "+" + digits
    if not unit:
        return digits
    return f"{digits}{unit}" if unit.startswith("/") else f"{digits} {unit}"


def threshold_value(result: ThresholdResult) -> str:
    return number(result.value, result.unit)


def threshold_line(result: ThresholdResult) -> str:
    """ "p99 latency < 250 ms: 312.4 ms (run, cluster)", and why when the result says."""
    line = f"{result.text}: {threshold_value(result)} ({result.over}, {result.scope})"
    return f"{line}: {result.reason}" if result.reason else line


def change(figure: GateFigure) -> str:
    """Candidate − base: "+12.3 %" when the tolerance is relative, else in the figure's units."""
    return number(figure.change, "%" if figure.relative else "", signed=True)


def interval(figure: GateFigure) -> str:
    """The change's confidence interval: "[+8.1 %, +16.0 %]"; n/a when there is none."""
    if figure.low is None or figure.high is None:
        return NO_VALUE
    unit = "%" if figure.relative else ""
    return f"[{number(figure.low, unit, signed=True)}, {number(figure.high, unit, signed=True)}]"


# The columns of a gated figure's row in the gate's tables (the console's and Markdown's).
GATE_HEADERS = ("figure", "tolerance", "base", "candidate", "change", "95 % CI")


def gate_cells(figure: GateFigure) -> tuple[str, ...]:
    """A gated figure's row under GATE_HEADERS."""
    return (
        figure.figure,
        figure.tolerance,
        number(figure.base),
        number(figure.candidate),
        change(figure),
        interval(figure),
    )


def gate_line(figure: GateFigure) -> str:
    """ "p99_ms +12.3 % [+8.1 %, +16.0 %], tolerance +10% (base 200.0, candidate 224.6)"."""
    line = (
        f"{figure.figure} {change(figure)} {interval(figure)}, tolerance {figure.tolerance} "
        f"(base {number(figure.base)}, candidate {number(figure.candidate)})"
    )
    return f"{line}: {figure.reason}" if figure.reason else line
