"""The `feed_rows` measurement: a point per ledger state at the run's end (docs/metrics.md)."""

from loadfleet.controller.output.sinks.feedpoints import feed_points


def test_a_point_per_state_with_its_rows():
    points = feed_points(run_id="r1", rows={"used": 28, "in_flight_at_loss": 2, "unused": 0}, at_ms=1_700_000_000_000)
    assert [p.line() for p in points] == [
        "feed_rows,run=r1,state=used rows=28i 1700000000000",
        "feed_rows,run=r1,state=in_flight_at_loss rows=2i 1700000000000",
        "feed_rows,run=r1,state=unused rows=0i 1700000000000",
    ]
    assert feed_points(run_id="r1", rows={}, at_ms=0) == []  # a run without a unique feed writes none
