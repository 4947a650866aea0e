"""The outbox's bounded spool: past its limit the oldest messages on disk are dropped, never
one in memory; a `SpoolDrop` notice takes their place in the sequence, naming exactly the
reports dropped; what is left arrives in order, numbered consecutively; a full disk drops
the messages it cannot write and garbles nothing."""

from __future__ import annotations

import asyncio

import pytest

from loadfleet.agent.outbox import Outbox
from loadfleet.agent.spool import LEGACY_FILE, Spool
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.framing import parse_frames
from support.tmpfs import fill, small_disk

SEGMENT = 4096


def report(start_ms: int, requests: int = 10, job_id: str = "run-1") -> agent_pb2.AgentMessage:
    """An interval report of about 1 KB, its `*`/`*` row holding `requests`."""
    rows = [
        stats_pb2.IntervalStats(target="http://t", request="r", requests=requests, bytes_in=10**9),
        stats_pb2.IntervalStats(target="*", request="*", requests=requests, bytes_in=10**9),
    ]
    pb = stats_pb2.IntervalReport(
        interval_start_ms=start_ms,
        interval_ms=1000,
        stats=rows,
        error_samples=[stats_pb2.ErrorSample(message="x" * 900)],
    )
    return agent_pb2.AgentMessage(interval=agent_pb2.AgentInterval(job_id=job_id, report=pb))


def on_disk(directory) -> int:
    return sum(p.stat().st_size for p in directory.glob("outbox-*.spool"))


async def drain(box: Outbox) -> list[agent_pb2.AgentMessage]:
    """Writes and acknowledges everything held, as a session to a live controller does."""
    out = []
    while True:
        try:
            message = await asyncio.wait_for(box.next(), 0.1)
        except TimeoutError:
            return out
        box.written(message)
        box.ack(message.seq)
        out.append(message)


def split(sent: list[agent_pb2.AgentMessage]) -> tuple[list[int], list[agent_pb2.SpoolDrop]]:
    """Interval starts (s) of the reports sent, and the notices."""
    return (
        [m.interval.report.interval_start_ms // 1000 for m in sent if m.HasField("interval")],
        [m.spool_drop for m in sent if m.HasField("spool_drop")],
    )


def dropped_starts(notices) -> list[int]:
    return [t for n in notices for t in range(n.first_interval_ms // 1000, n.last_interval_ms // 1000 + 1)]


def test_past_its_limit_the_spool_drops_its_oldest_and_a_notice_takes_their_place(tmp_path):
    limit = 8 * SEGMENT  # about 32 reports

    async def go():
        box = Outbox(tmp_path, memory_limit=4, spool_limit_bytes=limit)
        sizes = []
        for i in range(100):  # the controller acknowledges nothing meanwhile
            box.put(report(i * 1000, requests=i))
            sizes.append(on_disk(tmp_path))
        return sizes, await drain(box)

    sizes, sent = asyncio.run(go())
    assert max(sizes) <= limit, "the spool never holds more than its limit"
    starts, notices = split(sent)
    assert starts[:4] == [0, 1, 2, 3], "what was in memory is never dropped"
    assert [m.seq for m in sent] == list(range(sent[0].seq, sent[0].seq + len(sent))), "no gap in the numbers"
    [notice] = notices
    assert sent[4].HasField("spool_drop"), "the notice comes where the dropped messages were"
    lost = dropped_starts(notices)
    assert sorted(starts + lost) == list(range(100)), "each report arrives, or the notice names it"
    assert starts[4:] == list(range(lost[-1] + 1, 100)), "the newest arrive, in order"
    assert (notice.job_id, notice.messages, notice.reports) == ("run-1", len(lost), len(lost))
    assert notice.requests == sum(lost), "the requests of exactly the reports dropped"
    assert "limit of 0.03125 MiB" in notice.cause
    assert on_disk(tmp_path) == 0, "a spool sent and acknowledged is removed"


def test_what_was_read_back_from_a_dropped_segment_is_still_sent(tmp_path):
    async def go():
        box = Outbox(tmp_path, memory_limit=4, spool_limit_bytes=4 * SEGMENT)
        for i in range(10):
            box.put(report(i * 1000))
        first = []
        for _ in range(2):
            first.append(await box.next())
            box.written(first[-1])
        box.ack(first[-1].seq)  # room for two: read back from the oldest segment
        for i in range(10, 40):  # which the limit then drops
            box.put(report(i * 1000))
        return first + await drain(box)

    starts, notices = split(asyncio.run(go()))
    assert starts[:6] == [0, 1, 2, 3, 4, 5], "two in memory, then the two read back before the drop"
    assert notices[0].first_interval_ms == 6000
    assert sorted(starts + dropped_starts(notices)) == list(range(40))


def test_a_message_larger_than_the_limit_is_dropped_alone(tmp_path):
    box = Outbox(tmp_path, memory_limit=0, spool_limit_bytes=512)
    box.put(report(7000))
    held = []
    box._spool.read_back(lambda m: held.append(m) or len(held), 10)
    [notice] = [m.spool_drop for m in held]
    assert notice.messages == 1 and notice.first_interval_ms == notice.last_interval_ms == 7000
    assert "larger than the spool's limit" in notice.cause
    assert on_disk(tmp_path) == 0


@pytest.mark.process
def test_a_full_disk_drops_the_messages_it_cannot_write_and_garbles_nothing(tmp_path):
    with small_disk(tmp_path / "disk", 128) as disk:
        spool = Spool(disk / "spool", limit_bytes=2**20)
        spool.append(report(0))
        filler = fill(disk, leave_bytes=1500)  # room for about one more report, then none
        for i in range(1, 6):
            spool.append(report(i * 1000))
        filler.unlink()
        spool.append(report(6000))
        held = []
        while spool.has_unread:
            spool.read_back(lambda m: held.append(m) or len(held), 64)
    starts, notices = split(held)
    assert notices and all("No space left on device" in n.cause and str(disk / "spool") in n.cause for n in notices)
    assert len(notices) == 1, "the reports that could not be written in a row are one stretch"
    assert sorted(starts + dropped_starts(notices)) == list(range(7)), "each report written whole, or named"
    assert starts == sorted(starts) and starts[-1] == 6


def test_a_stretch_written_between_two_failures_splits_the_notices(tmp_path):
    spool = Spool(tmp_path, limit_bytes=2**20)
    failing = {1, 2, 4}
    real_write = spool._write

    def write(segment, data):  # a disk that fails exactly these writes
        [payload], _ = parse_frames(data)
        if agent_pb2.AgentMessage.FromString(payload).interval.report.interval_start_ms // 1000 in failing:
            raise OSError(28, "No space left on device")
        real_write(segment, data)

    spool._write = write
    for i in range(6):
        spool.append(report(i * 1000))
    held = []
    spool.read_back(lambda m: held.append(m) or len(held), 64)
    starts, notices = split(held)
    assert [(n.first_interval_ms, n.last_interval_ms) for n in notices] == [(1000, 2000), (4000, 4000)]
    assert starts == [0, 3, 5]


def test_a_spool_left_by_an_agent_before_segments_is_sent_first(tmp_path):
    old = Outbox(tmp_path / "old", memory_limit=0)
    for i in range(3):
        old.put(report(i * 1000))
    [segment] = (tmp_path / "old").glob("outbox-*.spool")
    (tmp_path / "new").mkdir()
    segment.rename(tmp_path / "new" / LEGACY_FILE)
    box = Outbox(tmp_path / "new", memory_limit=2)
    box.put(report(3000))
    sent = asyncio.run(drain(box))
    assert [m.interval.report.interval_start_ms for m in sent] == [0, 1000, 2000, 3000]
