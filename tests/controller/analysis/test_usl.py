"""The USL fit recovers known coefficients (acceptance: within 5 %)."""

from __future__ import annotations

import math
import random

import pytest

from loadfleet.controller.analysis.usl import NotEnoughPoints, fit_usl, usl

NS = (1, 2, 4, 6, 8, 10, 12, 16, 24, 32)


@pytest.mark.parametrize(
    "sigma,kappa,lam", [(0.05, 0.002, 1000.0), (0.2, 0.0001, 300.0), (0.02, 0.01, 50.0), (0.0, 0.0005, 120.0)]
)
def test_recovers_coefficients_from_exact_points(sigma, kappa, lam):
    fit = fit_usl([(n, usl(n, sigma, kappa, lam)) for n in NS])
    assert fit.sigma == pytest.approx(sigma, rel=0.05, abs=1e-6)
    assert fit.kappa == pytest.approx(kappa, rel=0.05)
    assert fit.lambda_ == pytest.approx(lam, rel=0.05)
    assert fit.r_squared > 0.9999
    assert fit.peak_n == pytest.approx(math.sqrt((1 - sigma) / kappa), rel=0.05)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recovers_coefficients_from_noisy_points_within_5_pct(seed):
    rng = random.Random(seed)
    sigma, kappa, lam = 0.05, 0.002, 1000.0
    points = [(n, usl(n, sigma, kappa, lam) * (1 + rng.uniform(-0.002, 0.002))) for n in NS for _ in range(3)]
    fit = fit_usl(points)
    assert fit.sigma == pytest.approx(sigma, rel=0.05)
    assert fit.kappa == pytest.approx(kappa, rel=0.05)
    assert fit.lambda_ == pytest.approx(lam, rel=0.05)
    assert 0.999 < fit.r_squared <= 1


def test_linear_scaling_has_no_peak():
    fit = fit_usl([(n, 100.0 * n) for n in (1, 2, 4, 8, 16)])
    assert fit.lambda_ == pytest.approx(100, rel=1e-3)
    assert abs(fit.sigma) < 1e-3 and abs(fit.kappa) < 1e-4
    assert fit.peak_n is None or fit.peak_n > 1000


def test_a_bad_fit_says_so():
    fit = fit_usl([(1, 100), (2, 20), (3, 150), (4, 30), (5, 160)])
    assert fit.r_squared < 0.5


@pytest.mark.parametrize(
    "points",
    [
        [],
        [(1, 10), (2, 20)],
        [(1, 10), (1, 11), (2, 20)],
        [(1, 0), (2, 0), (3, 0)],
        # 3 cluster sizes, however many repetitions: 3 parameters fit them exactly
        [(n, 100.0 * n * (1 + r / 100)) for n in (1, 2, 4) for r in range(5)],
        [(1, 10), (2, 19), (3, 27), (4, 34), (5, 0)],
    ],
)
def test_too_few_sizes_is_not_enough_points(points):
    with pytest.raises(NotEnoughPoints, match="not enough points"):
        fit_usl(points)


def test_the_issue_s_three_sizes_say_not_enough_points_instead_of_a_negative_kappa():
    with pytest.raises(NotEnoughPoints):
        fit_usl([(1, 1000), (2, 1030), (4, 990)])


@pytest.mark.parametrize(
    "points",
    [
        [(n, 100.0 * n * (1 + 0.02 * n)) for n in (1, 2, 3, 4, 5, 6)],  # superlinear: would need σ < 0
        [(1, 100), (2, 150), (3, 160), (4, 200), (5, 240), (6, 290)],  # convex tail: would need κ < 0
    ],
)
def test_parameters_stay_in_the_model_s_range(points):
    fit = fit_usl(points)
    assert 0 <= fit.sigma <= 1 and fit.kappa >= 0 and fit.lambda_ > 0
    assert fit.sigma_ci[0] >= 0 and fit.kappa_ci[0] >= 0


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_a_noisy_true_curve_has_its_coefficients_within_the_fit_s_intervals(seed):
    rng = random.Random(seed)
    sigma, kappa, lam = 0.08, 0.004, 500.0
    points = [
        (n, usl(n, sigma, kappa, lam) * (1 + rng.gauss(0, 0.03))) for n in (1, 2, 4, 6, 8, 12, 16, 24) for _ in range(3)
    ]
    fit = fit_usl(points)
    assert fit.sigma_ci[0] <= sigma <= fit.sigma_ci[1]
    assert fit.kappa_ci[0] <= kappa <= fit.kappa_ci[1]
    assert fit.lambda_ci[0] <= lam <= fit.lambda_ci[1]
    # Informative, not vacuous: each interval narrower than the value is large.
    assert fit.sigma_ci[1] - fit.sigma_ci[0] < sigma and fit.kappa_ci[1] - fit.kappa_ci[0] < kappa
    assert fit.sizes == 8 and fit.points == 24


def test_exact_points_have_tight_intervals():
    fit = fit_usl([(n, usl(n, 0.05, 0.002, 1000.0)) for n in NS])
    assert fit.kappa_ci[1] - fit.kappa_ci[0] < 1e-6


def test_points_flat_from_the_first_still_get_a_fit():
    # A client sweep measured on a busy machine (a reproduction run): the start from the
    # linear fit of N/X has a <= 0 and the refinement used to stay there (R² = -27,360).
    pts = [(10, 5529.5), (25, 7023.0), (50, 8121.0), (100, 6589.5), (200, 5730.5), (400, 4510.0), (800, 5078.0)]
    fit = fit_usl(pts)
    assert fit.r_squared > 0.5
    assert 25 < fit.peak_n < 100  # the measured peak is at 50


def test_linear_points_have_no_peak():
    # Perfectly linear scaling fits κ ≈ 1e-20: a "peak" at N ≈ 1e10 is not one to report.
    fit = fit_usl([(n, 10.0 * n) for n in (50, 100, 150, 200, 250)])
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.peak_n is None and fit.peak_x is None
