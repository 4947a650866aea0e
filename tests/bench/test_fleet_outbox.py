"""The simulated agent's outbox: cumulative acks, a bound, and drops that are counted."""

from __future__ import annotations

import pytest

from bench.fleet.fleetsim.outbox import Outbox


def test_ack_forgets_through_seq_and_times_each_message():
    outbox = Outbox(capacity=10)
    assert [outbox.add(now_s=float(t)) for t in range(3)] == [1, 2, 3]
    assert outbox.ack(2, now_s=5.0) == [5.0, 4.0]
    assert outbox.outstanding == 1
    assert outbox.ack(2, now_s=6.0) == []  # a repeated ack covers nothing new
    assert outbox.ack(3, now_s=6.0) == [4.0] and outbox.outstanding == 0


def test_a_full_outbox_drops_the_oldest_and_counts_it():
    outbox = Outbox(capacity=3)
    for t in range(5):
        outbox.add(now_s=float(t))
    assert (outbox.outstanding, outbox.dropped) == (3, 2)
    assert outbox.ack(5, now_s=10.0) == [8.0, 7.0, 6.0]  # messages 3..5; 1 and 2 were dropped


def test_an_ack_beyond_what_was_sent_is_counted_and_clamped():
    outbox = Outbox(capacity=3)
    outbox.add(now_s=0.0)
    assert outbox.ack(9, now_s=1.0) == [1.0]
    assert outbox.acks_beyond_sent == 1 and outbox.add(now_s=2.0) == 2


def test_an_outbox_holds_at_least_one_message():
    with pytest.raises(ValueError):
        Outbox(capacity=0)
