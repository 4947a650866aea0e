"""The Universal Scalability Law: fit X(N) = λN / (1 + σ(N−1) + κN(N−1)).

N is the concurrency (clients, users) or the number of servers; X the throughput.
σ (contention) says how much of the work is serialized, κ (coherency) how much the
parts pay to keep in step with each other, λ the throughput of one unit alone. With
κ > 0, throughput peaks at N* = sqrt((1 − σ) / κ) and falls beyond it.

The fit is least squares on X, without scipy: a linear fit of N/X (which is a
quadratic in N) gives the starting point, and damped Gauss-Newton steps
(Levenberg-Marquardt) refine it on the throughputs themselves, kept inside the model's
range (0 ≤ σ ≤ 1, κ ≥ 0, λ > 0): a negative κ or a σ above 1 describes no system.

Three parameters fit three points exactly whatever they are, so a fit needs at least
`MIN_SIZES` distinct N (else `NotEnoughPoints`), and says how sure it is: each
parameter's `CONFIDENCE` interval from the fit's covariance, s²(JᵀJ)⁻¹ with s² the
residual variance on n − 3 degrees of freedom and Student's t (clipped to the model's
range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loadfleet.controller.analysis.inference import t_quantile

MIN_SIZES = 5
CONFIDENCE = 0.95
# A peak predicted further out than this many times the largest N measured is no peak the
# data can speak for (perfectly linear points give κ ≈ 1e-20 and a peak at N ≈ 1e10).
PEAK_REACH = 10
_MAX_ITERATIONS = 200
_LOWER = (0.0, 0.0, 1e-12)
_UPPER = (1.0, math.inf, math.inf)


class NotEnoughPoints(ValueError):
    """Too few distinct N for a fit that could be wrong."""


@dataclass(frozen=True)
class UslFit:
    sigma: float  # contention
    kappa: float  # coherency
    lambda_: float  # throughput of one unit (N = 1)
    r_squared: float  # fit quality on X: 1 is perfect
    points: int
    peak_n: float | None  # N at the throughput peak; None when κ = 0 or beyond PEAK_REACH (no peak)
    peak_x: float | None  # the predicted throughput there
    sizes: int = 0  # distinct N
    # CONFIDENCE intervals (low, high) of σ, κ and λ.
    sigma_ci: tuple[float, float] = (0.0, 0.0)
    kappa_ci: tuple[float, float] = (0.0, 0.0)
    lambda_ci: tuple[float, float] = (0.0, 0.0)

    def predict(self, n: float) -> float:
        return usl(n, self.sigma, self.kappa, self.lambda_)

    def describe(self) -> str:
        ci = int(CONFIDENCE * 100)
        peak = f", peak at N = {self.peak_n:.1f}" if self.peak_n else ", no peak within reach"
        return (
            f"σ = {self.sigma:.4f} [{self.sigma_ci[0]:.4f}, {self.sigma_ci[1]:.4f}], "
            f"κ = {self.kappa:.6f} [{self.kappa_ci[0]:.6f}, {self.kappa_ci[1]:.6f}], "
            f"λ = {self.lambda_:.1f}/s [{self.lambda_ci[0]:.1f}, {self.lambda_ci[1]:.1f}] ({ci} % intervals), "
            f"R² = {self.r_squared:.3f} over {self.points} points at {self.sizes} sizes{peak}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "sigma": self.sigma,
            "kappa": self.kappa,
            "lambda": self.lambda_,
            "r_squared": self.r_squared,
            "points": self.points,
            "sizes": self.sizes,
            "peak_n": self.peak_n,
            "peak_x": self.peak_x,
            "confidence": CONFIDENCE,
            "sigma_ci": list(self.sigma_ci),
            "kappa_ci": list(self.kappa_ci),
            "lambda_ci": list(self.lambda_ci),
        }


def usl(n: float, sigma: float, kappa: float, lambda_: float) -> float:
    return lambda_ * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def fit_usl(points: list[tuple[float, float]]) -> UslFit:
    """Fits (N, X) points (repetitions at one N are separate points); needs MIN_SIZES
    distinct N with N > 0 and X > 0, else raises NotEnoughPoints."""
    pts = [(float(n), float(x)) for n, x in points if n > 0 and x > 0]
    sizes = len({n for n, _ in pts})
    if sizes < MIN_SIZES:
        raise NotEnoughPoints(
            f"not enough points: {sizes} distinct size(s) with throughput, a USL fit needs {MIN_SIZES}"
        )
    # The refinement can stall where it starts (e.g. with no contention on points that are
    # flat from the first): start also from a few contention levels and keep the best.
    starts = [_clamp(_linear_start(pts)), *(_contention_start(pts, sigma) for sigma in (0.0, 0.1, 0.5, 0.9))]
    params = min((_refine(pts, start) for start in starts), key=lambda p: _cost(pts, p))
    sigma, kappa, lam = params
    peak_n = peak_x = None
    if kappa > 0 and sigma < 1 and math.sqrt((1 - sigma) / kappa) <= PEAK_REACH * max(n for n, _ in pts):
        peak_n = math.sqrt((1 - sigma) / kappa)
        peak_x = usl(peak_n, sigma, kappa, lam)
    sigma_ci, kappa_ci, lambda_ci = _intervals(pts, params)
    return UslFit(
        sigma=sigma,
        kappa=kappa,
        lambda_=lam,
        r_squared=_r_squared(pts, params),
        points=len(pts),
        peak_n=peak_n,
        peak_x=peak_x,
        sizes=sizes,
        sigma_ci=sigma_ci,
        kappa_ci=kappa_ci,
        lambda_ci=lambda_ci,
    )


def _intervals(pts: list[tuple[float, float]], params: list[float]) -> list[tuple[float, float]]:
    """Each parameter's CONFIDENCE interval from the covariance s²(JᵀJ)⁻¹, clipped to the
    model's range; (−inf, inf) clipped when JᵀJ is singular (the data cannot tell)."""
    dof = len(pts) - 3
    jac, _ = _jacobian(pts, params)
    jtj = [[sum(j[r] * j[c] for j in jac) for c in range(3)] for r in range(3)]
    s2 = _cost(pts, params) / dof
    t = t_quantile(0.5 + CONFIDENCE / 2, dof)
    out = []
    for i in range(3):
        unit = [1.0 if k == i else 0.0 for k in range(3)]
        try:
            half = t * math.sqrt(max(0.0, s2 * _solve(jtj, unit)[i]))
        except ZeroDivisionError:
            half = math.inf
        out.append((max(_LOWER[i], params[i] - half), min(_UPPER[i], params[i] + half)))
    return out


def _clamp(params: list[float]) -> list[float]:
    return [min(max(p, lo), hi) for p, lo, hi in zip(params, _LOWER, _UPPER)]


def _contention_start(pts: list[tuple[float, float]], sigma: float) -> list[float]:
    """σ given, no coherency cost, λ so that the curve passes through the first point."""
    n0, x0 = min(pts)
    return [sigma, 0.0, x0 / n0 * (1 + sigma * (n0 - 1))]


def _linear_start(pts: list[tuple[float, float]]) -> list[float]:
    """N/X = a + b(N−1) + cN(N−1) with a = 1/λ, b = σ/λ, c = κ/λ: linear least squares."""
    rows = [[1.0, n - 1, n * (n - 1)] for n, _ in pts]
    ys = [n / x for n, x in pts]
    a, b, c = _least_squares(rows, ys)
    if a <= 0:  # a bad start; λ from the first point, no contention
        n0, x0 = min(pts)
        return [0.0, 0.0, x0 / n0]
    return [b / a, c / a, 1 / a]


def _refine(pts: list[tuple[float, float]], params: list[float]) -> list[float]:
    damping = 1e-3
    cost = _cost(pts, params)
    for _ in range(_MAX_ITERATIONS):
        jac, res = _jacobian(pts, params)
        jtj = [[sum(j[r] * j[c] for j in jac) for c in range(3)] for r in range(3)]
        jtr = [sum(j[r] * e for j, e in zip(jac, res)) for r in range(3)]
        improved = False
        while damping < 1e12:
            system = [[jtj[r][c] * (1 + damping if r == c else 1) for c in range(3)] for r in range(3)]
            try:
                step = _solve(system, jtr)
            except ZeroDivisionError:
                damping *= 10
                continue
            trial = _clamp([p + s for p, s in zip(params, step)])
            trial_cost = _cost(pts, trial)
            if trial_cost < cost:
                done = cost - trial_cost <= 1e-15 * max(cost, 1e-300)
                params, cost, damping, improved = trial, trial_cost, max(damping / 10, 1e-12), True
                if done:
                    return params
                break
            damping *= 10
        if not improved:
            break
    return params


def _jacobian(pts: list[tuple[float, float]], params: list[float]) -> tuple[list[list[float]], list[float]]:
    """Rows of d model / d (σ, κ, λ), and residuals (X − model)."""
    sigma, kappa, lam = params
    jac: list[list[float]] = []
    res: list[float] = []
    for n, x in pts:
        d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
        model = lam * n / d
        jac.append([-model * (n - 1) / d, -model * n * (n - 1) / d, n / d])
        res.append(x - model)
    return jac, res


def _cost(pts: list[tuple[float, float]], params: list[float]) -> float:
    sigma, kappa, lam = params
    total = 0.0
    for n, x in pts:
        d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
        if d <= 0:
            return math.inf
        total += (x - lam * n / d) ** 2
    return total


def _r_squared(pts: list[tuple[float, float]], params: list[float]) -> float:
    mean = sum(x for _, x in pts) / len(pts)
    total = sum((x - mean) ** 2 for _, x in pts)
    return 1.0 - _cost(pts, params) / total if total > 0 else 1.0


def _least_squares(rows: list[list[float]], ys: list[float]) -> list[float]:
    k = len(rows[0])
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    aty = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(k)]
    return _solve(ata, aty)


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting; ZeroDivisionError when singular."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    scale = max(abs(v) for row in a for v in row) or 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) <= 1e-14 * scale:
            raise ZeroDivisionError("singular system")
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x
