"""The controller's clock against the agent's: the round trip with the shortest time wins."""

from __future__ import annotations

from loadfleet.agent.clock import SAMPLES, ClockEstimate


def test_the_offset_is_read_at_the_midpoint_of_the_shortest_round_trip():
    clock = ClockEstimate()
    assert clock.best is None and clock.offset_ms == 0
    clock.add(sent_at_ms=1000, controller_at_ms=3005, received_at_ms=1010)  # symmetric: 2000 ms ahead
    clock.add(sent_at_ms=2000, controller_at_ms=4400, received_at_ms=2300)  # queued on the way back
    assert (clock.best.offset_ms, clock.best.rtt_ms) == (2000, 10)


def test_a_clock_set_back_during_a_round_trip_says_nothing_and_old_samples_are_forgotten():
    clock = ClockEstimate()
    clock.add(sent_at_ms=5000, controller_at_ms=5000, received_at_ms=4000)
    assert clock.best is None
    clock.add(sent_at_ms=1000, controller_at_ms=1000, received_at_ms=1002)
    for i in range(SAMPLES):
        clock.add(sent_at_ms=10_000 + i, controller_at_ms=10_500 + i, received_at_ms=10_020 + i)
    assert clock.best.rtt_ms == 20 and clock.offset_ms == 490
