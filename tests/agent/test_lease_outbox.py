import asyncio

from loadfleet.agent.cli import parse_labels
from loadfleet.agent.lease import Lease
from loadfleet.agent.outbox import Outbox
from loadfleet.v1 import agent_pb2

import pytest


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


def test_outbox_keeps_a_message_until_done_and_drops_stale_heartbeats():
    async def go():
        box = Outbox()
        box.put(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sent_at_ms=1)))
        box.put(agent_pb2.AgentMessage(job_status=agent_pb2.JobStatus(job_id="j")))
        box.drop_heartbeats()
        first = await box.peek()
        again = await box.peek()
        box.done()
        return first, again, len(box)
    first, again, left = asyncio.run(go())
    assert first is again and first.WhichOneof("body") == "job_status"
    assert left == 0


@pytest.mark.parametrize("items, expected", [
    (["zone=a,rack=3"], (("rack", "3"), ("zone", "a"))),
    (["a=1", "b=2"], (("a", "1"), ("b", "2"))),
])
def test_labels(items, expected):
    assert parse_labels(items) == expected


def test_bad_label_is_a_usage_error():
    from loadfleet.agent.errors import UsageError
    with pytest.raises(UsageError):
        parse_labels(["novalue"])


def interval(start_ms):
    return agent_pb2.AgentMessage(interval=agent_pb2.AgentInterval(job_id="j", report={"interval_start_ms": start_ms}))


async def drain(box, n):
    out = []
    for _ in range(n):
        out.append(await box.peek())
        box.done()
    return out


def test_outbox_spools_to_disk_beyond_its_memory_limit_and_keeps_order(tmp_path):
    async def go():
        box = Outbox(tmp_path, memory_limit=3)
        for i in range(10):
            box.put(interval(i))
        on_disk = (tmp_path / "outbox.spool").stat().st_size
        assert len(box) == 10 and on_disk > 0
        first = await drain(box, 4)
        box.put(interval(10))  # the spool is not empty yet: this goes behind it, on disk
        rest = await drain(box, 7)
        return first + rest
    sent = asyncio.run(go())
    assert [m.interval.report.interval_start_ms for m in sent] == list(range(11))
    assert not (tmp_path / "outbox.spool").exists(), "an empty spool is removed"


def test_a_restarted_agent_sends_what_an_earlier_run_spooled(tmp_path):
    async def go():
        first = Outbox(tmp_path, memory_limit=0)
        for i in range(5):
            first.put(interval(i))
        # The agent dies here; the queue in memory is gone, the spool stays.
        with (tmp_path / "outbox.spool").open("ab") as f:
            f.write(b"\x05\x01")  # and its last frame was cut short
        second = Outbox(tmp_path)
        return await drain(second, 5), len(second)
    sent, left = asyncio.run(go())
    assert [m.interval.report.interval_start_ms for m in sent] == list(range(5))
    assert left == 0
