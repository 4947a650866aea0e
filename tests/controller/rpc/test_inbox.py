"""The agents' inbox: arrival order, slices that let heartbeats through, a bound, and a
handler's failure that costs one message only."""

import asyncio
import logging
import time

from loadfleet.controller.rpc.inbox import Inbox


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


async def drained(inbox: Inbox, handled: list, expected: int) -> None:
    for _ in range(500):
        if len(handled) == expected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(handled)} of {expected} handled")


def test_items_are_handled_in_the_order_they_were_put():
    async def main():
        handled = []
        inbox = Inbox(handled.append)
        for i in range(300):
            await inbox.put(i, 1)
        await drained(inbox, handled, 300)
        await inbox.close()
        return handled

    assert asyncio.run(main()) == list(range(300))


def test_a_backlog_gives_the_loop_back_after_each_slice():
    """50 items of 5 ms each, slices of 10 ms: a callback scheduled once they are queued (a
    heartbeat) runs within a slice or two, long before the backlog is worked off."""

    async def main():
        handled = []
        inbox = Inbox(lambda i: (busy(0.005), handled.append(i)), slice_s=0.01)
        for i in range(50):
            await inbox.put(i, 1)
        queued_at = time.monotonic()
        beat = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(lambda: beat.set_result((time.monotonic() - queued_at, len(handled))))
        waited_s, handled_by_then = await beat
        await drained(inbox, handled, 50)
        await inbox.close()
        return waited_s, handled_by_then

    waited_s, handled_by_then = asyncio.run(main())
    assert handled_by_then <= 10, f"the heartbeat waited for {handled_by_then} items"
    assert waited_s < 0.1


def test_the_inbox_holds_at_most_its_limit_in_bytes_and_holds_the_senders_back():
    async def main():
        seen = []
        inbox: Inbox[int] = Inbox(lambda i: seen.append(inbox.held_bytes), limit_bytes=300)

        async def sender(first: int):
            for i in range(first, first + 40):
                await inbox.put(i, 100)

        await asyncio.gather(*(sender(k * 100) for k in range(5)))
        await drained(inbox, seen, 200)
        await inbox.close()
        return seen

    seen = asyncio.run(main())
    assert max(seen) <= 200 and len(seen) == 200, "at most 3 held: the one handled and 2 more"


def test_a_message_larger_than_the_limit_goes_in_alone():
    async def main():
        handled = []
        inbox: Inbox[str] = Inbox(lambda i: handled.append((i, len(inbox))), limit_bytes=100)
        await inbox.put("small", 10)
        await inbox.put("huge", 1000)  # waits until the inbox is empty, then goes in
        await inbox.put("after", 10)
        await drained(inbox, handled, 3)
        await inbox.close()
        return handled

    assert asyncio.run(main()) == [("small", 0), ("huge", 0), ("after", 0)]


def test_a_message_that_fails_is_logged_and_the_next_ones_are_handled(caplog):
    def handle(i: int) -> None:
        if i == 2:
            raise ValueError("malformed")
        handled.append(i)

    handled: list[int] = []

    async def main():
        inbox = Inbox(handle)
        for i in range(5):
            await inbox.put(i, 1)
        await drained(inbox, handled, 4)
        await inbox.close()

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert handled == [0, 1, 3, 4]
    assert "could not be handled" in caplog.text and "malformed" in caplog.text


def test_a_sender_past_its_share_waits_alone_and_the_others_go_first():
    """A sender that fills its share (a hostile or buggy agent) holds up its own puts only."""

    async def main():
        handled: list[str] = []
        inbox: Inbox[str] = Inbox(handled.append, limit_bytes=1000, sender_limit_bytes=300)

        async def send(sender: str, n: int) -> None:
            for i in range(n):
                await inbox.put(f"{sender}{i}", 100, sender=sender)

        await asyncio.gather(send("r", 10), send("g", 3))
        await drained(inbox, handled, 13)
        await inbox.close()
        return handled

    handled = asyncio.run(main())
    assert handled[:6] == ["r0", "r1", "r2", "g0", "g1", "g2"], handled
    assert handled[6:] == [f"r{i}" for i in range(3, 10)]
