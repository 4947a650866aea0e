"""Knee detection on saturation curves with the knee at a known place."""
from __future__ import annotations

import pytest

from loadfleet.controller.knee import LevelPoint, find_knee


def curve(offered, achieved, p99, errors=None):
    errors = errors or [0.0] * len(offered)
    return [LevelPoint(f"s{i + 1}", o, a, p, e) for i, (o, a, p, e) in enumerate(zip(offered, achieved, p99, errors))]


def test_open_model_capped_server():
    # Capped at 250/s: 300/s offered is the first level it cannot take.
    knee = find_knee(curve([100, 200, 300, 400], [100, 200, 250, 250], [5, 6, 300, 700]))
    assert knee.name == "s3" and knee.index == 2
    assert knee.efficiency == pytest.approx(250 / 300)
    assert knee.marginal_gain == pytest.approx(0.5)
    assert (knee.previous_p99_ms, knee.p99_ms) == (6, 300)


def test_closed_model_flat_throughput_with_rising_latency():
    # 1 client does 1000/s; the server tops out at 3000/s.
    knee = find_knee(curve([1, 2, 4, 8, 16], [1000, 2000, 3000, 3050, 3000], [1, 1, 1.4, 2.7, 5.4]))
    assert knee.name == "s3"


def test_errors_instead_of_latency():
    # The server sheds load with fast 503s: ok/s stays flat, errors rise, latency does not.
    knee = find_knee(curve([100, 200, 400], [100, 200, 210], [2, 2, 2], [0, 0, 47]))
    assert knee.name == "s3"


@pytest.mark.parametrize("achieved,p99", [
    ([100, 200, 300, 400], [5, 6, 7, 8]),  # proportional
    ([100, 200, 300, 400], [5, 50, 500, 5000]),  # latency rises, throughput keeps up: no knee
    ([100, 200, 250, 260], [5, 5, 5.2, 5.5]),  # flat but latency does not rise: noise, not a knee
])
def test_no_knee(achieved, p99):
    assert find_knee(curve([100, 200, 300, 400], achieved, p99)) is None


@pytest.mark.parametrize("points", [[], curve([100], [100], [1]), curve([100, 200], [0, 0], [0, 0])])
def test_too_little_to_say(points):
    assert find_knee(points) is None
