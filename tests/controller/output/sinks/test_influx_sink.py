import asyncio

import pytest

from loadfleet.controller.output.sinks.influx import InfluxRejected, InfluxSink, InfluxUnavailable
from loadfleet.controller.output.sinks.lineproto import Point


def points(start, n):
    return [Point("m", tags=(("run", "r"),), fields=(("i", i),), time_ms=i) for i in range(start, start + n)]


class FlakyWriter:
    """Fails while `down` is set, records every batch it accepts."""

    def __init__(self):
        self.down = False
        self.reject_next = False
        self.lines = []

    def __call__(self, lines):
        if self.down:
            raise InfluxUnavailable("down")
        if self.reject_next:
            self.reject_next = False
            raise InfluxRejected("bad")
        self.lines.extend(lines)


def written_ids(writer):
    return [int(line.split(" ")[1].split("=")[1].rstrip("i")) for line in writer.lines]


def test_outage_spools_then_replays_everything_in_order(tmp_path):
    writer = FlakyWriter()

    async def go():
        sink = InfluxSink(writer, tmp_path / "spool", batch_points=10, flush_interval_s=0.01)
        sink.start()
        sink.add(points(0, 25))
        await asyncio.sleep(0.1)
        writer.down = True
        sink.add(points(25, 40))
        await asyncio.sleep(0.2)
        assert len(list((tmp_path / "spool").glob("*.lp"))) >= 1, "the outage spools to disk"
        writer.down = False
        sink.add(points(65, 5))
        return await sink.close(timeout_s=5)

    account = asyncio.run(go())
    assert written_ids(writer) == list(range(70))
    assert "70 points written" in account
    assert not list((tmp_path / "spool").glob("*.lp"))


def test_memory_is_bounded_while_influx_is_down(tmp_path):
    writer = FlakyWriter()
    writer.down = True

    async def go():
        sink = InfluxSink(writer, tmp_path / "spool", batch_points=100, memory_points=500, flush_interval_s=0.01)
        for i in range(20):
            sink.add(points(i * 100, 100))  # add is synchronous: it cannot wait for InfluxDB
            assert len(sink._pending) <= 500
        account = await sink.close(timeout_s=0.2)
        return account

    account = asyncio.run(go())
    assert "2000 points wait in" in account
    # a later sink on the same spool replays the leftovers first
    writer.down = False

    async def later():
        sink = InfluxSink(writer, tmp_path / "spool", batch_points=100)
        return await sink.close(timeout_s=5)

    asyncio.run(later())
    assert written_ids(writer) == list(range(2000))


def test_a_rejected_batch_is_dropped_and_counted(tmp_path):
    writer = FlakyWriter()
    writer.reject_next = True

    async def go():
        sink = InfluxSink(writer, tmp_path / "spool", batch_points=10)
        sink.add(points(0, 20))
        return await sink.close(timeout_s=2)

    account = asyncio.run(go())
    assert "10 rejected" in account
    assert written_ids(writer) == list(range(10, 20))


@pytest.mark.parametrize(
    "point, line",
    [
        (
            Point("http", (("run", "a b"), ("agent", "")), (("n", 3), ("x", 1.5), ("ok", True)), 1000),
            "http,run=a\\ b n=3i,x=1.5,ok=true 1000",
        ),
        (Point("event", (("kind", "k,=1"),), (("text", 'say "hi"'),), 5), 'event,kind=k\\,\\=1 text="say \\"hi\\"" 5'),
    ],
)
def test_line_protocol(point, line):
    assert point.line() == line
