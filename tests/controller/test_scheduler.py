import pytest

from loadfleet.controller.scheduler import barrier_start_ms, split_clients, split_exact


@pytest.mark.parametrize("total, weights, expected", [
    (10, [1, 1], [5, 5]),
    (10, [3, 1], [8, 2]),        # 7.5 / 2.5: the tie goes to the first
    (7, [2, 2, 2], [3, 2, 2]),
    (1, [4, 4], [1, 0]),
    (100, [1, 2, 3, 4], [10, 20, 30, 40]),
    (0, [1, 5], [0, 0]),
])
def test_split_exact_sums_and_is_proportional(total, weights, expected):
    assert split_exact(total, weights) == expected
    assert sum(split_exact(total, weights)) == total


def test_split_needs_a_positive_weight():
    with pytest.raises(ValueError):
        split_exact(3, [0, 0])


def test_agents_with_no_share_are_left_out():
    shares = split_clients(3, [("a", 2), ("b", 2), ("c", 2), ("d", 2)])
    assert [(s.agent_id, s.clients) for s in shares] == [("a", 1), ("b", 1), ("c", 1)]


@pytest.mark.parametrize("now, interval, expected", [
    (10_000, 1000, 12_000), (10_001, 1000, 13_000), (10_999, 500, 13_000)])
def test_barrier_is_an_interval_boundary_at_least_the_lead_ahead(now, interval, expected):
    assert barrier_start_ms(now, interval, lead_ms=2000) == expected
