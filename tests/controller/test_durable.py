"""Checkpoints' fsync off the event loop (durable.py), on real files. The disk's slowness is
played by an fsync that waits for the test: a real disk cannot be made slow on demand."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest

from loadfleet.controller.durable import Syncer
from loadfleet.controller.rundisk import AppendFile, DiskTrouble


class SlowDisk:
    """An fsync that records what it synced and, while `held`, waits until released."""

    def __init__(self) -> None:
        self.synced: list[int] = []  # inode of each descriptor synced
        self.gate = threading.Event()
        self.started = threading.Event()
        self.error: OSError | None = None

    def fsync(self, fd: int) -> None:
        self.started.set()
        assert self.gate.wait(10), "the test never released the disk"
        os.fsync(fd)  # the descriptor is valid: a real fsync
        self.synced.append(os.fstat(fd).st_ino)
        if self.error is not None:
            raise self.error


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_the_loop_goes_on_while_the_disk_syncs_and_requests_meanwhile_are_merged(tmp_path):
    trouble = DiskTrouble(tmp_path)
    files = [AppendFile(tmp_path / name, trouble) for name in ("intervals.csv", "latency.hlog")]
    disk = SlowDisk()
    syncer = Syncer(fsync=disk.fsync)
    before = open_fds()

    async def run() -> int:
        ticks = 0
        for f in files:
            f.write("first\n")
        syncer.request(files)
        await asyncio.to_thread(disk.started.wait, 10)  # the first sync is under way, and held
        for i in range(5):  # five checkpoints while the disk is slow
            for f in files:
                f.write(f"line {i}\n")
            syncer.request(files)
            await asyncio.sleep(0.01)
            ticks += 1
        disk.gate.set()
        await syncer.drained()
        return ticks

    assert asyncio.run(run()) == 5  # the loop was never held by the disk
    inodes = sorted(os.stat(f.path).st_ino for f in files)
    # One sync of both files, then the five requests made meanwhile as one more.
    assert sorted(disk.synced) == sorted(inodes * 2)
    assert open_fds() == before  # every duplicate descriptor closed
    assert all(f.path.read_text().endswith("line 4\n") for f in files)  # flushed by the request
    assert not trouble.incomplete


def test_a_file_closed_while_its_sync_waits_is_still_synced(tmp_path):
    trouble = DiskTrouble(tmp_path)
    file = AppendFile(tmp_path / "events.jsonl", trouble)
    disk = SlowDisk()
    syncer = Syncer(fsync=disk.fsync)

    async def run() -> None:
        file.write("{}\n")
        syncer.request([file])
        await asyncio.to_thread(disk.started.wait, 10)
        file.close()  # the run ended meanwhile
        disk.gate.set()
        await syncer.drained()

    asyncio.run(run())
    assert disk.synced == [os.stat(file.path).st_ino] and not trouble.incomplete


def test_a_sync_that_fails_is_a_failed_write(tmp_path):
    trouble = DiskTrouble(tmp_path)
    file = AppendFile(tmp_path / "intervals.csv", trouble)
    disk = SlowDisk()
    disk.error = OSError(errno.EIO, "Input/output error")
    disk.gate.set()
    syncer = Syncer(fsync=disk.fsync)

    async def run() -> None:
        file.write("a complete interval\n")
        syncer.request([file])
        await syncer.drained()

    asyncio.run(run())
    assert trouble.incomplete == ("intervals.csv",)
    file.write("written no more\n")
    file.flush()
    assert file.path.read_text() == "a complete interval\n"


def test_without_an_event_loop_the_sync_is_done_at_once(tmp_path):
    trouble = DiskTrouble(tmp_path)
    file = AppendFile(tmp_path / "hosts.csv", trouble)
    disk = SlowDisk()
    disk.gate.set()
    file.write("x\n")
    Syncer(fsync=disk.fsync).request([file])
    assert disk.synced == [os.stat(file.path).st_ino]


@pytest.mark.parametrize("closed", [True, False])
def test_a_file_that_takes_no_writes_is_not_synced(tmp_path, closed):
    trouble = DiskTrouble(tmp_path)
    file = AppendFile(tmp_path / "hosts.csv", trouble)
    if closed:
        file.close()
    else:
        file.sync_failed(OSError(errno.ENOSPC, "No space left on device"))
    disk = SlowDisk()
    disk.gate.set()
    Syncer(fsync=disk.fsync).request([file])
    assert disk.synced == []
