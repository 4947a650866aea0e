"""The run directory's writes in a thread of their own (diskwriter.py), on real files. A busy
disk is played by an operation that holds the writer's thread until the test releases it: a
real disk cannot be made slow on demand. What it shows: the loop goes on while the disk is
busy; what must follow the disk (agents' settles, followers) waits for it; the queue is
bounded; a full disk (a real tmpfs) is told on the loop; the thread ends when idle."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from loadfleet.controller.output.diskwriter import DiskWriter
from loadfleet.controller.output.rundir import INTERVALS_FILE
from loadfleet.controller.output.rundisk import AppendFile, DiskTrouble
from loadfleet.controller.output.watchers import IntervalUpdate
from loadfleet.controller.run.journal import CHECKPOINT_FILE, RECORDS_FILE, RunJournal
from loadfleet.controller.run.records import RunEnded, RunStarted, StepsSkipped
from support.streamdata import closed, pipeline, row, window
from support.tmpfs import fill, small_disk


class BusyDisk:
    """Holds the writer's thread (an operation that waits) until released."""

    def __init__(self, disk: DiskWriter):
        self.gate = threading.Event()
        self.holding = threading.Event()
        disk.submit(self._hold)

    def _hold(self) -> None:
        self.holding.set()
        assert self.gate.wait(10), "the test never released the disk"


def test_the_loop_goes_on_while_the_disk_is_busy_and_what_follows_the_disk_waits_for_it(tmp_path):
    disk = DiskWriter()
    file = AppendFile(tmp_path / INTERVALS_FILE, DiskTrouble(tmp_path), header="n\n", disk=disk)
    followed: list[str] = []

    async def run() -> int:
        busy = BusyDisk(disk)
        await asyncio.to_thread(busy.holding.wait, 10)
        ticks = 0
        for i in range(5):  # five intervals while the disk is busy
            file.write(f"{i}\n")
            file.flush()
            disk.then(lambda i=i: followed.append(f"{i}: {file.path.read_text().count(chr(10)) - 1} lines"))
            await asyncio.sleep(0.01)
            ticks += 1
        assert followed == [] and file.path.read_text() == "", "nothing written, nothing followed yet"
        assert file.tell() == len("n\n0\n1\n2\n3\n4\n"), "tell says where the file will end"
        busy.gate.set()
        await disk.drained()
        return ticks

    assert asyncio.run(run()) == 5, "the loop was never held by the disk"
    assert file.path.read_text() == "n\n0\n1\n2\n3\n4\n"
    # Each callback came once its own interval was written (the disk may be further on by then).
    assert [int(f.split(":")[0]) for f in followed] == [0, 1, 2, 3, 4]
    assert all(int(f.split(": ")[1].split()[0]) >= int(f.split(":")[0]) + 1 for f in followed), followed


def test_a_loop_further_ahead_than_the_bound_waits_for_the_disk(tmp_path):
    disk = DiskWriter(max_bytes=4096)
    file = AppendFile(tmp_path / INTERVALS_FILE, DiskTrouble(tmp_path), disk=disk)
    seen: list[int] = []

    async def run() -> float:
        busy = BusyDisk(disk)
        await asyncio.to_thread(busy.holding.wait, 10)
        threading.Timer(0.5, busy.gate.set).start()
        started = time.monotonic()
        for _ in range(10):  # 10 KB: more than the bound
            file.write(b"x" * 1000)
            seen.append(disk.queued_bytes)
        waited = time.monotonic() - started
        file.flush()
        await disk.drained()
        return waited

    waited = asyncio.run(run())
    assert waited >= 0.4, "the writes past the bound waited for the disk"
    assert max(seen) <= 4096, seen
    assert file.path.stat().st_size == 10_000, "nothing lost"


@pytest.mark.process
def test_a_full_disk_is_told_on_the_loop_and_the_file_stays_a_clean_beginning(tmp_path):
    told: list[tuple[str, str]] = []
    with small_disk(tmp_path / "disk", 64) as root:
        trouble = DiskTrouble(root, on_first=lambda text: told.append((threading.current_thread().name, text)))
        disk = DiskWriter()
        file = AppendFile(root / INTERVALS_FILE, trouble, header="n,text\n", disk=disk)

        async def run() -> int:
            fill(root, leave_bytes=8192)
            lines = 0
            while not file.closed and lines < 100_000:
                file.write(f"{lines},{'x' * 100}\n")
                if lines % 10 == 9:
                    file.flush()
                    await disk.drained()
                lines += 1
            return lines

        lines = asyncio.run(run())
        content = (root / INTERVALS_FILE).read_text()
        assert lines < 100_000 and file.closed
        assert len(content.encode()) == file.tell()
        assert (content.count("\n") - 1) % 10 == 0, "whole flushes only"
        assert trouble.incomplete == (INTERVALS_FILE,)
        assert [name for name, _ in told] == [threading.main_thread().name], "told once, on the loop's thread"


@pytest.mark.process
def test_a_journal_written_in_the_thread_stops_as_a_whole_at_its_first_failure(tmp_path):
    with small_disk(tmp_path / "disk", 64) as root:
        trouble = DiskTrouble(root)
        disk = DiskWriter()

        async def run() -> RunJournal:
            journal = RunJournal(root, trouble, disk)
            journal.record(RunStarted(("a1",)))
            journal.checkpoint({"n": 1})
            await disk.drained()
            filler = fill(root, leave_bytes=0)
            journal.record(StepsSkipped(("x" * 100,) * 200))  # fails in the thread
            journal.checkpoint({"n": 2})  # asked before the loop heard of the failure
            await disk.drained()
            filler.unlink()
            journal.record(RunEnded("finished"))
            journal.checkpoint({"n": 3})
            await disk.drained()
            return journal

        journal = asyncio.run(run())
        directory = root / "journal"
        assert journal.stopped and trouble.incomplete == (f"journal/{RECORDS_FILE}",)
        assert json.loads((directory / CHECKPOINT_FILE).read_text()) == {"n": 1}
        assert [json.loads(line)["kind"] for line in (directory / RECORDS_FILE).read_text().splitlines()] == ["run"]


def test_settles_and_followers_wait_until_the_interval_is_on_disk(tmp_path):
    settled: list[tuple[str, int]] = []
    run_pipeline = pipeline(tmp_path, settle=lambda agent, seq: settled.append((agent, seq)))
    step = window()

    async def run() -> list:
        run_pipeline.start(agents=["a"], hostnames=[], clock_offsets_ms={})
        follower = run_pipeline.watchers.follow()
        await run_pipeline.disk.drained()
        busy = BusyDisk(run_pipeline.disk)
        await asyncio.to_thread(busy.holding.wait, 10)
        run_pipeline.publish(closed(step, 10_000, a=[row(5)]), late={})
        await run_pipeline.published()
        for _ in range(10):
            await asyncio.sleep(0.01)
        assert settled == [], "not acknowledged before its interval is on disk"
        assert not any(isinstance(item, IntervalUpdate) for item in follower._items), "no update yet"
        assert "10000" not in (tmp_path / INTERVALS_FILE).read_text()
        busy.gate.set()
        await run_pipeline.disk.drained()
        return list(follower._items)

    items = asyncio.run(run())
    assert settled == [("a", 1)]
    assert [item.interval_start_ms for item in items if isinstance(item, IntervalUpdate)] == [10_000]
    assert "10000,cluster" in (tmp_path / INTERVALS_FILE).read_text()


def test_the_thread_ends_when_idle_and_starts_again_with_more_work(tmp_path):
    disk = DiskWriter(idle_s=0.05)
    file = AppendFile(tmp_path / INTERVALS_FILE, DiskTrouble(tmp_path), disk=disk)

    async def run() -> tuple[int, int]:
        file.write("a\n")
        file.flush()
        await disk.drained()
        during = disk.working
        await asyncio.sleep(0.3)
        after = disk.working
        file.write("b\n")
        file.flush()
        await disk.drained()
        return during, after

    during, after = asyncio.run(run())
    assert (during, after) == (True, False)
    assert file.path.read_text() == "a\nb\n"


def test_without_an_event_loop_everything_is_done_at_once(tmp_path):
    disk = DiskWriter()
    file = AppendFile(tmp_path / INTERVALS_FILE, DiskTrouble(tmp_path), disk=disk)
    called = []
    file.write("a\n")
    file.flush()
    disk.then(lambda: called.append(file.path.read_text()))
    assert called == ["a\n"] and not disk.working
