"""Knee detection on saturation curves with the knee at a known place."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.knee import LevelPoint, find_knee, search_knee


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
    # 1 client does 1000/s; the server tops out at 3000/s. At 4 clients p99 rises by 0.4 ms
    # only, below the 1 ms that matters: the knee is where it rises by 1.3 ms.
    knee = find_knee(curve([1, 2, 4, 8, 16], [1000, 2000, 3000, 3050, 3000], [1, 1, 1.4, 2.7, 5.4]))
    assert knee.name == "s4"
    assert find_knee(curve([1, 2, 4, 8, 16], [1000, 2000, 3000, 3050, 3000], [10, 10, 14, 27, 54])).name == "s3"


def test_errors_instead_of_latency():
    # The server sheds load with fast 503s: ok/s stays flat, errors rise, latency does not.
    knee = find_knee(curve([100, 200, 400], [100, 200, 210], [2, 2, 2], [0, 0, 47]))
    assert knee.name == "s3"


@pytest.mark.parametrize(
    "achieved,p99",
    [
        ([100, 200, 300, 400], [5, 6, 7, 8]),  # proportional
        ([100, 200, 300, 400], [5, 50, 500, 5000]),  # latency rises, throughput keeps up: no knee
        ([100, 200, 250, 260], [5, 5, 5.2, 5.5]),  # flat but latency does not rise: noise, not a knee
    ],
)
def test_no_knee(achieved, p99):
    assert find_knee(curve([100, 200, 300, 400], achieved, p99)) is None


@pytest.mark.parametrize("points", [[], curve([100], [100], [1]), curve([100, 200], [0, 0], [0, 0])])
def test_too_little_to_say(points):
    assert find_knee(points) is None


def test_a_quarter_millisecond_p99_rise_at_2_clients_of_a_1_to_64_sweep_is_no_knee():
    # The case: on a busy machine 2 clients did not double the throughput of 1 and
    # p99 went 1.00 → 1.25 ms; the sweep then kept growing to 16 clients.
    offered = [1, 2, 4, 8, 16, 32, 64]
    achieved = [1000, 1500, 3000, 5900, 11000, 12000, 12100]
    p99 = [1.0, 1.25, 1.3, 1.4, 1.6, 3.0, 6.0]
    search = search_knee(curve(offered, achieved, p99))
    assert search.knee is not None and search.knee.name == "s6"
    # The same rise with nothing after it to confirm it: still too small to matter.
    assert find_knee(curve([1, 2], [1000, 1500], [1.0, 1.25])) is None


def test_a_dip_that_later_levels_climb_out_of_is_no_knee():
    # s2 is flat with p99 up by 5 ms, but s3 and s4 grow again in proportion: noise.
    assert find_knee(curve([100, 200, 300, 400], [100, 130, 300, 400], [5, 10, 6, 7])) is None


def repeated(offered, achieved, p99s, errors=None):
    errors = errors or [[0.0] * len(p) for p in p99s]
    return [
        LevelPoint.of(f"s{i + 1}", o, [a] * len(p), list(p), list(e))
        for i, (o, a, p, e) in enumerate(zip(offered, achieved, p99s, errors))
    ]


def test_repetitions_give_a_confidence_and_a_noisy_rise_cannot_be_told():
    offered, achieved = [100, 200, 300, 400], [100, 200, 250, 250]
    clear = search_knee(repeated(offered, achieved, [[5, 5.2, 4.9], [6, 6.1, 5.8], [300, 310, 290], [700, 690, 720]]))
    assert clear.knee.name == "s3" and clear.knee.confidence > 0.99 and clear.knee.repetitions == 3
    # Same means, but the repetitions scatter more than the rise: it cannot tell.
    noisy = search_knee(repeated(offered, achieved, [[5, 5, 5], [1, 11, 6], [10, 20, 870], [5, 15, 2080]]))
    assert noisy.knee is None and noisy.note.startswith("cannot tell: s3 looks like a knee")


def test_without_repetitions_the_knee_says_it_has_no_confidence():
    knee = find_knee(curve([100, 200, 300, 400], [100, 200, 250, 250], [5, 6, 300, 700]))
    assert knee.confidence is None and "no confidence" in knee.describe()
