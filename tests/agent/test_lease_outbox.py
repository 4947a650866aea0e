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
