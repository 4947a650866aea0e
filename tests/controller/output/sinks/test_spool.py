"""The InfluxDB spool: one per run (locked), bounded (the oldest batches dropped and counted,
never one being sent), known from file names (read back a few batches at a time), and the
spools of ended runs sent first by the next run to the same InfluxDB."""

from __future__ import annotations

import asyncio

import pytest

from loadfleet.controller.model.events import EventKind
from loadfleet.controller.output.sinks.influx import InfluxSink, InfluxUnavailable
from loadfleet.controller.output.sinks.lineproto import Point
from loadfleet.controller.output.sinks.output import InfluxOutput
from loadfleet.controller.output.sinks.spool import Spool, SpoolBusy
from support.streamdata import interval, window
from support.tmpfs import fill, small_disk


def lines(start: int, n: int) -> list[str]:
    return [f"m,run=r i={i}i {i}" for i in range(start, start + n)]


def ids(text_lines) -> list[int]:
    return [int(line.split("i=")[1].split("i")[0]) for line in text_lines]


def test_past_its_limit_the_oldest_batches_go_and_are_counted(tmp_path):
    spool = Spool(tmp_path / "run-1", limit_bytes=1000)
    sizes = []
    for b in range(20):
        spool.push(lines(b * 10, 10))  # about 180 bytes a batch
        sizes.append(spool.bytes)
    assert max(sizes) <= 1000
    kept = ids(Spool.read(spool.oldest(10**6)))
    dropped = spool.dropped()
    assert kept == list(range(200 - len(kept), 200)), "the newest are kept, in order"
    assert dropped.points == 200 - len(kept) and dropped.batches == dropped.points // 10
    assert "limit of 0.000953674 MiB" in dropped.cause
    assert sum(p.stat().st_size for p in (tmp_path / "run-1").glob("*.lp")) == spool.bytes


def test_a_batch_being_sent_is_never_dropped(tmp_path):
    spool = Spool(tmp_path / "run-1", limit_bytes=600)
    spool.push(lines(0, 10))
    sending = spool.oldest(10)
    for b in range(1, 6):
        spool.push(lines(b * 10, 10))
    assert sending[0].path.exists()
    spool.remove(sending)
    assert ids(Spool.read(spool.oldest(10**6)))[0] > 10


def test_batches_are_read_back_a_few_at_a_time_and_known_from_their_names(tmp_path):
    spool = Spool(tmp_path / "run-1", limit_bytes=10**6)
    for b in range(5):
        spool.push(lines(b * 100, 100))
    assert len(spool.oldest(250)) == 2 and len(spool.oldest(50)) == 1
    spool.close()
    for path in (tmp_path / "run-1").glob("*.lp"):
        path.write_text("")  # the contents are not read to know what the spool holds
    again = Spool(tmp_path / "run-1", limit_bytes=10**6)
    assert again.points() == 500 and len(again) == 5


def test_one_spool_per_run_and_an_ended_runs_spool_is_sent_first_by_the_next(tmp_path):
    root = tmp_path / "influx-abc"
    first = Spool(root / "20300101-000000-aaaa", limit_bytes=10**6)
    with pytest.raises(SpoolBusy):
        Spool(root / "20300101-000000-aaaa", limit_bytes=10**6)
    live = Spool(root / "20300101-000001-bbbb", limit_bytes=10**6, adopt=True)
    first.push(lines(0, 10))
    live.push(lines(100, 10))
    assert ids(Spool.read(live.oldest(10**6))) == list(range(100, 110)), "a live run's spool is its own"
    first.close()  # its run ended with points left

    later = Spool(root / "20300101-000002-cccc", limit_bytes=10**6, adopt=True)
    later.push(lines(200, 10))
    batches = later.oldest(10**6)
    assert ids(Spool.read(batches)) == list(range(10)) + list(range(200, 210)), "the ended run's first"
    later.remove(batches)
    assert not (root / "20300101-000000-aaaa").exists(), "an adopted spool sent in full is removed"
    assert (root / "20300101-000001-bbbb").exists()
    later.close()
    assert not (root / "20300101-000002-cccc").exists()


@pytest.mark.process
def test_a_full_disk_drops_the_batch_it_cannot_write(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        spool = Spool(disk / "influx-abc" / "run-1", limit_bytes=10**6)
        spool.push(lines(0, 10))
        filler = fill(disk, leave_bytes=0)
        spool.push(lines(10, 1000))
        dropped = spool.dropped()
        assert dropped.points == 1000 and "No space left on device" in dropped.cause
        assert str(disk / "influx-abc" / "run-1") in dropped.cause
        filler.unlink()
        spool.push(lines(1010, 10))
        assert ids(Spool.read(spool.oldest(10**6))) == list(range(10)) + list(range(1010, 1020))
        assert not list((disk / "influx-abc" / "run-1").glob("*.tmp"))
        spool.close()


def test_a_sink_whose_spool_cannot_be_made_sends_what_it_can_and_counts_the_rest(tmp_path):
    (tmp_path / "not-a-directory").write_text("")
    writer = DownWriter()

    async def go():
        sink = InfluxSink(writer, tmp_path / "not-a-directory" / "run-1", batch_points=100, flush_interval_s=0.01)
        sink.start()
        sink.add(points(0, 100))
        await asyncio.sleep(0.1)  # InfluxDB is down: the batch cannot wait on disk
        writer.down = False
        await asyncio.sleep(0.7)  # past the sink's first backoff
        sink.add(points(100, 100))
        await asyncio.sleep(0.1)
        return sink.dropped(), await sink.close(timeout_s=5)

    dropped, account = asyncio.run(go())
    assert ids(writer.lines) == list(range(100, 200))
    assert dropped.points == 100 and f"cannot make the spool {tmp_path / 'not-a-directory' / 'run-1'}" in dropped.cause
    assert "100 points written" in account and "100 dropped from the spool" in account


class DownWriter:
    def __init__(self):
        self.down = True
        self.lines = []

    def __call__(self, lines):
        if self.down:
            raise InfluxUnavailable("down")
        self.lines += lines


def points(start, n):
    return [Point("m", tags=(("run", "r"),), fields=(("i", i),), time_ms=i) for i in range(start, start + n)]


def test_during_an_outage_points_go_to_disk_and_the_oldest_are_dropped_past_the_limit(tmp_path):
    writer = DownWriter()

    async def go():
        sink = InfluxSink(writer, tmp_path / "run-1", batch_points=100, flush_interval_s=0.01, spool_limit_bytes=2000)
        sink.start()
        for i in range(30):
            sink.add(points(i * 10, 10))
            await asyncio.sleep(0.02)
            assert len(sink._pending) < 100, "InfluxDB is down: points wait on disk, not in memory"
        writer.down = False
        return sink.dropped(), await sink.close(timeout_s=5)

    dropped, account = asyncio.run(go())
    written = ids(writer.lines)
    assert dropped.points > 0 and written == list(range(300 - len(written), 300)), "the newest, in order"
    assert len(written) + dropped.points == 300
    assert f"{dropped.points} dropped from the spool (the spool reached its limit" in account


class Dropping:
    """A sink whose spool dropped `points` so far."""

    def __init__(self):
        self.points = 0
        self.added = []

    def add(self, points):
        self.added += points

    def dropped(self):
        from loadfleet.controller.output.sinks.spool import Dropped

        return Dropped(self.points, 1, "the spool reached its limit of 1 MiB")


def test_drops_become_run_events_at_once_then_at_most_a_minute_apart():
    sink, events, now = Dropping(), [], [100.0]
    output = InfluxOutput("run-1", [sink], emit=events.append, clock=lambda: now[0])
    step = window("main", start_ms=0, seconds=10)
    sink.points = 500
    output.on_interval(interval(step, 0, a=[]))
    sink.points = 800
    output.on_interval(interval(step, 1000, a=[]))
    assert [e.kind for e in events] == [EventKind.SPOOL_DROPPED]
    assert events[0].text.startswith("500 InfluxDB points dropped from the controller's spool (500 in all")
    now[0] += 60
    output.on_interval(interval(step, 2000, a=[]))
    assert events[-1].text.startswith("300 InfluxDB points dropped") and "(800 in all" in events[-1].text
    sink.points = 900
    now[0] += 1
    output.on_interval(interval(step, 3000, a=[]))
    assert len(events) == 2
