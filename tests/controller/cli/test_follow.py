"""`loadfleet run` following a run whose watch is cut off (a controller that stalled past the
keepalive, or restarted): it follows the run again, prints no event twice, and gives up with
the hint to `loadfleet status` only after its retries."""

from __future__ import annotations

import asyncio
import json

import pytest

from loadfleet.controller.cli import follow as following
from loadfleet.controller.model.errors import ControllerUnreachable
from loadfleet.v1 import run_pb2

STARTED = run_pb2.RunEvent(at_ms=1, kind=run_pb2.EVENT_KIND_RUN_STARTED, text="run r1: 2 clients")
LOST = run_pb2.RunEvent(at_ms=5, kind=run_pb2.EVENT_KIND_AGENT_LOST, agent_id="a2", text="agent a2 lost")
SUMMARY = run_pb2.RunSummary(run_id="r1", state=run_pb2.RUN_STATE_FINISHED, summary_json=json.dumps({"run_id": "r1"}))


class CutOffClient:
    """Each watch plays the next of `watches`; an exception in one cuts that watch off there."""

    def __init__(self, *watches: list) -> None:
        self.watches = list(watches)
        self.followed = 0

    async def watch(self, run_id: str):
        self.followed += 1
        for item in self.watches.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item

    async def stop_run(self, run_id: str) -> None:
        raise AssertionError("nobody pressed Ctrl-C")


def event(e: run_pb2.RunEvent) -> run_pb2.RunUpdate:
    return run_pb2.RunUpdate(event=e)


def interval(start_ms: int) -> run_pb2.RunUpdate:
    return run_pb2.RunUpdate(interval=run_pb2.IntervalSummary(interval_start_ms=start_ms, agents=1, rps=10.0))


CUT = ControllerUnreachable("lost the controller at 127.0.0.1:7700 (Connection reset by peer)")


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch):
    monkeypatch.setattr(following, "REFOLLOW_PAUSES_S", (0.0, 0.0))


def test_a_cut_off_watch_is_followed_again_and_its_replayed_events_are_not_printed_twice(capsys):
    client = CutOffClient(
        [event(STARTED), interval(1000), CUT],
        [event(STARTED), event(LOST), interval(2000), run_pb2.RunUpdate(finished=SUMMARY)],  # replays STARTED
    )
    code = asyncio.run(following.follow(client, "r1", as_json=False))  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert code == 0 and client.followed == 2
    assert out.count("run r1: 2 clients") == 1 and out.count("agent a2 lost") == 1
    assert "(Connection reset by peer); following run r1 again in 0 s" in err


def test_it_gives_up_after_its_retries_with_the_way_to_follow_again():
    client = CutOffClient([CUT], [CUT], [CUT])
    with pytest.raises(ControllerUnreachable, match=r"`loadfleet status r1` follows it again"):
        asyncio.run(following.follow(client, "r1", as_json=False))  # type: ignore[arg-type]
    assert client.followed == 3


def test_the_events_kept_in_mind_are_bounded_like_the_controllers():
    printed = following._Printed()
    for i in range(3 * following.KEPT_EVENTS):
        assert printed.new(run_pb2.RunEvent(at_ms=i, text=f"e{i}"))
    assert not printed.new(run_pb2.RunEvent(at_ms=0, text="e0"))  # among the first, as the controller keeps
    assert not printed.new(run_pb2.RunEvent(at_ms=2999, text="e2999"))  # among the last
    assert len(printed._first) + len(printed._recent) == 2 * following.KEPT_EVENTS


def test_a_silent_controller_is_said_at_once_not_followed_again():
    """No keepalive answer for 11 s: following again would wait as long again (the fleet
    promises the CLI notices within 15 s, tests/e2e/test_keepalive.py)."""
    silent = following.ControllerSilent("lost the controller at 127.0.0.1:7700 (it answered no keepalive ping ...)")
    client = CutOffClient([silent], [run_pb2.RunUpdate(finished=SUMMARY)])
    with pytest.raises(ControllerUnreachable, match=r"no keepalive ping .*`loadfleet status r1` follows it again"):
        asyncio.run(following.follow(client, "r1", as_json=False))  # type: ignore[arg-type]
    assert client.followed == 1
