"""Small statistics for honest analysis, without scipy: Student's t distribution and
Welch's test of whether one set of repetitions is above another.

`t_cdf` goes through the regularized incomplete beta function (continued fraction, as in
Numerical Recipes §6.4); `t_quantile` inverts it by bisection. Accurate to ~1e-10, far
beyond what a handful of repetitions can say.
"""

from __future__ import annotations

import math
import statistics

_EPS = 1e-14
_MAX_TERMS = 300


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with `df` degrees of freedom (df > 0)."""
    if df <= 0:
        raise ValueError("degrees of freedom must be above 0")
    x = df / (df + t * t)
    tail = 0.5 * _betai(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T ≤ t) = p."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def welch_greater(a: list[float], b: list[float], margin: float = 0.0) -> float | None:
    """One-sided p-value of mean(b) − mean(a) > margin (Welch's t-test); None when either
    side has fewer than 2 values. Equal values on both sides give 0 or 1 by their means."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(b) - statistics.fmean(a) - margin
    if va + vb == 0:
        return 0.0 if diff > 0 else 1.0
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return 1 - t_cdf(t, df)


def _betai(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < _EPS:
            break
    return h
