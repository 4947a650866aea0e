import asyncio

import pytest

from loadfleet.agent.cli import parse_labels
from loadfleet.agent.lease import Lease
from loadfleet.agent.outbox import Outbox
from loadfleet.v1 import agent_pb2


def test_lease_expires_only_after_being_granted():
    now = [100.0]
    lease = Lease(clock=lambda: now[0])
    assert not lease.expired()
    lease.renew(3000)
    now[0] += 2.9
    assert not lease.expired()
    now[0] += 0.2
    assert lease.expired()
    lease.renew(3000)
    assert not lease.expired()


def heartbeat(at_ms: int = 1):
    return agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sent_at_ms=at_ms))


def test_a_message_stays_until_acknowledged_and_is_written_again_after_a_reconnect():
    async def go():
        box = Outbox()
        box.put(heartbeat())
        box.put(agent_pb2.AgentMessage(job_status=agent_pb2.JobStatus(job_id="j")))
        box.put(interval(7))
        beat = await box.next()
        assert beat.WhichOneof("body") == "heartbeat"  # liveness first
        box.written(beat)
        status = await box.next()
        box.written(status)
        report = await box.next()
        box.written(report)
        assert box.unacknowledged == 2 and report.seq == status.seq + 1
        box.rewind()  # the session broke before any acknowledgement
        again = [await box.next()]
        box.written(again[0])
        box.ack(status.seq)
        assert box.unacknowledged == 1
        again.append(await box.next())  # the report is still owed to the new session
        box.written(again[1])
        box.ack(report.seq)
        return status, report, again, box.unacknowledged

    status, report, again, left = asyncio.run(go())
    assert [m.seq for m in again] == [status.seq, report.seq]
    assert left == 0


def test_heartbeats_are_never_kept_and_a_newer_one_pushing_out_the_one_written_skips_nothing():
    async def go():
        box = Outbox()
        box.put(interval(1))
        first = await box.next()
        box.put(heartbeat(1))
        beat = await box.next()
        assert beat.WhichOneof("body") == "heartbeat"
        box.put(heartbeat(2))
        box.put(heartbeat(3))  # while the first is being written: it leaves the queue
        box.written(beat)
        second = await box.next()
        box.rewind()  # a reconnect drops heartbeats queued during the break
        return first, second, await box.next()

    first, second, after = asyncio.run(go())
    assert first is after  # never written (a heartbeat was), so nothing was skipped
    assert second.WhichOneof("body") == "heartbeat"


@pytest.mark.parametrize(
    "items, expected",
    [
        (["zone=a,rack=3"], (("rack", "3"), ("zone", "a"))),
        (["a=1", "b=2"], (("a", "1"), ("b", "2"))),
    ],
)
def test_labels(items, expected):
    assert parse_labels(items) == expected


def test_bad_label_is_a_usage_error():
    from loadfleet.agent.errors import UsageError

    with pytest.raises(UsageError):
        parse_labels(["novalue"])


def interval(start_ms):
    return agent_pb2.AgentMessage(interval=agent_pb2.AgentInterval(job_id="j", report={"interval_start_ms": start_ms}))


def spooled_bytes(directory) -> int:
    return sum(p.stat().st_size for p in directory.glob("outbox-*.spool"))


async def drain(box, n):
    """Writes and acknowledges `n` messages, as a session to a live controller does."""
    out = []
    for _ in range(n):
        message = await box.next()
        box.written(message)
        box.ack(message.seq)
        out.append(message)
    return out


def test_outbox_spools_to_disk_beyond_its_memory_limit_and_keeps_order(tmp_path):
    async def go():
        box = Outbox(tmp_path, memory_limit=3)
        for i in range(10):
            box.put(interval(i))
        assert box.unacknowledged == 3 and spooled_bytes(tmp_path) > 0
        first = await drain(box, 4)
        box.put(interval(10))  # the spool is not empty yet: this goes behind it, on disk
        rest = await drain(box, 7)
        return first + rest

    sent = asyncio.run(go())
    assert [m.interval.report.interval_start_ms for m in sent] == list(range(11))
    seqs = [m.seq for m in sent]
    assert seqs == list(range(seqs[0], seqs[0] + 11)), "numbered consecutively, spooled or not"
    assert not spooled_bytes(tmp_path), "an acknowledged spool is removed"


def test_a_spool_stays_until_what_was_read_back_is_acknowledged(tmp_path):
    async def go():
        box = Outbox(tmp_path, memory_limit=2)
        for i in range(4):
            box.put(interval(i))
        written = []
        for _ in range(4):  # the controller acknowledges each message one behind
            written.append(await box.next())
            box.written(written[-1])
            if len(written) > 1:
                box.ack(written[-2].seq)
        assert box.unacknowledged == 1 and spooled_bytes(tmp_path), "all read back, but the last is not acknowledged"
        box.ack(written[-1].seq)
        return written

    written = asyncio.run(go())
    assert [m.interval.report.interval_start_ms for m in written] == [0, 1, 2, 3]
    assert not spooled_bytes(tmp_path)


def test_memory_is_bounded_while_the_controller_acknowledges_nothing(tmp_path):
    async def go():
        box = Outbox(tmp_path, memory_limit=3)
        for i in range(10):
            box.put(interval(i))
        for _ in range(3):
            box.written(await box.next())
        with pytest.raises(TimeoutError):  # nothing more to write until acknowledgements make room
            await asyncio.wait_for(box.next(), 0.2)
        return box.unacknowledged

    assert asyncio.run(go()) == 3


def test_a_restarted_agent_sends_what_an_earlier_run_spooled(tmp_path):
    async def go():
        first = Outbox(tmp_path, memory_limit=0)
        for i in range(5):
            first.put(interval(i))
        # The agent dies here; the queue in memory is gone, the spool stays.
        with sorted(tmp_path.glob("outbox-*.spool"))[-1].open("ab") as f:
            f.write(b"\x05\x01")  # and its last frame was cut short
        second = Outbox(tmp_path)
        return await drain(second, 5), second.unacknowledged

    sent, left = asyncio.run(go())
    assert [m.interval.report.interval_start_ms for m in sent] == list(range(5))
    assert left == 0


def test_an_acknowledgement_that_overtakes_the_end_of_its_write_skips_nothing():
    async def go():
        box = Outbox()
        box.put(interval(0))
        first = await box.next()  # being written...
        box.ack(first.seq)  # ...and the controller acknowledged it before the write returned
        box.put(interval(1))
        box.written(first)
        return await asyncio.wait_for(box.next(), 1)

    assert asyncio.run(go()).interval.report.interval_start_ms == 1
