"""A full disk under a run directory (a real tmpfs): a file that cannot be written is cut
back to its last complete flush and written no more; the first failure is told once,
naming the disk; whole files keep their earlier version; what is incomplete is listed; the
journal stops as a whole; a controller taking the run over leaves incomplete files as they are."""

from __future__ import annotations

import csv
import errno
import json

import pytest

from loadfleet.controller.output.artifacts import store_artifact_chunk
from loadfleet.controller.output.rundir import RunDirWriter, write_atomic
from loadfleet.controller.output.rundisk import AppendFile, DiskTrouble, describe_disk
from loadfleet.controller.run.journal import CHECKPOINT_FILE, RECORDS_FILE, RunJournal
from loadfleet.controller.run.records import RunEnded, RunStarted, StepsSkipped
from loadfleet.controller.run.recovery import recover
from support.streamdata import closed, interval, pipeline, row, window
from support.tmpfs import fill, small_disk


@pytest.mark.process
def test_an_appended_file_stays_a_clean_beginning_and_the_first_failure_is_told_once(tmp_path):
    told = []
    with small_disk(tmp_path / "disk", 64) as disk:
        trouble = DiskTrouble(disk, on_first=told.append)
        log = AppendFile(disk / "intervals.csv", trouble, header="n,text\n")
        fill(disk, leave_bytes=8192)
        lines = 0
        while not log.closed:
            log.write(f"{lines},{'x' * 100}\n")
            if lines % 10 == 9:
                log.flush()  # as the run directory does at each interval's end
            lines += 1
        ended_at = log.tell()
        log.write("more\n")
        log.flush()
        other = AppendFile(disk / "events.jsonl", trouble)
        other.write("y" * 20_000)
        other.flush()
        content = (disk / "intervals.csv").read_text()
        assert len(content.encode()) == ended_at and log.tell() == ended_at
        rows = list(csv.reader(content.splitlines()))
        assert rows[0] == ["n", "text"] and all(len(r) == 2 for r in rows)
        assert len(rows) - 1 == (len(rows) - 1) // 10 * 10, "whole flushes only"
        assert trouble.incomplete == ("intervals.csv", "events.jsonl")
        assert len(told) == 1 and told[0].startswith(f"the disk of {disk} (tmpfs mounted at {disk},")
        assert "is full: intervals.csv" in told[0]
        assert "intervals.csv, events.jsonl incomplete" in trouble.describe()


@pytest.mark.process
def test_a_whole_file_that_cannot_be_written_keeps_its_earlier_version(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        write_atomic(disk / "steps.csv", "step\nmain\n")
        fill(disk, leave_bytes=0)
        trouble = DiskTrouble(disk)
        assert not trouble.attempt("steps.csv", lambda: write_atomic(disk / "steps.csv", "step\n" + "s\n" * 50_000))
        assert (disk / "steps.csv").read_text() == "step\nmain\n"
        assert not (disk / "steps.csv.tmp").exists()
        assert trouble.incomplete == ("steps.csv",)


@pytest.mark.process
def test_a_whole_file_written_again_once_there_is_room_is_whole(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        filler = fill(disk, leave_bytes=0)
        trouble = DiskTrouble(disk)
        assert not trouble.attempt("steps.csv", lambda: write_atomic(disk / "steps.csv", "s\n" * 50_000))
        filler.unlink()
        assert trouble.attempt("steps.csv", lambda: write_atomic(disk / "steps.csv", "step\nmain\n"))
        assert trouble.incomplete == ()


@pytest.mark.process
def test_the_journal_stops_as_a_whole_at_its_first_failure(tmp_path):
    told = []
    with small_disk(tmp_path / "disk", 64) as disk:
        trouble = DiskTrouble(disk, on_first=told.append)
        journal = RunJournal(disk, trouble)
        journal.record(RunStarted(("a1",)))
        journal.checkpoint({"n": 1})
        filler = fill(disk, leave_bytes=0)
        journal.record(StepsSkipped(("x" * 100,) * 200))
        assert journal.stopped and trouble.incomplete == (f"journal/{RECORDS_FILE}",) and len(told) == 1
        filler.unlink()  # room again: still no checkpoint beside an interval log it does not match
        journal.checkpoint({"n": 2})
        journal.record(RunEnded("finished"))
        directory = disk / "journal"
        assert json.loads((directory / CHECKPOINT_FILE).read_text()) == {"n": 1}
        assert [json.loads(line)["kind"] for line in (directory / RECORDS_FILE).read_text().splitlines()] == ["run"]


def test_a_file_left_incomplete_is_left_as_it_is_by_a_controller_that_takes_the_run_over(tmp_path):
    (tmp_path / "intervals.csv").write_text("head\n1\n")
    (tmp_path / "latency.hlog").write_text("head\n")
    trouble = DiskTrouble(tmp_path)
    trouble.cut_short("intervals.csv")  # the journal says so
    cut = AppendFile(tmp_path / "intervals.csv", trouble, header="head\n", keep_bytes=5)
    short = AppendFile(tmp_path / "latency.hlog", trouble, header="head\n", keep_bytes=100)  # not extended
    for f in (cut, short):
        f.write("2\n")
        f.flush()
    assert (tmp_path / "intervals.csv").read_text() == "head\n1\n" and cut.tell() == 7
    assert (tmp_path / "latency.hlog").read_text() == "head\n" and short.tell() == 5
    assert trouble.incomplete == ("intervals.csv", "latency.hlog")


class FullFile:
    """A file on a disk that just filled up: every write fails."""

    closed = False

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self):
        self.closed = True


def test_a_controller_that_takes_the_run_over_leaves_a_file_cut_short_as_it_is(tmp_path):
    step = window("main", start_ms=0, seconds=100)
    first = pipeline(tmp_path)
    first.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    first.publish(closed(step, 0, a=[row(5)]), late={})
    first.writer._intervals._file = FullFile()  # the disk fills up under intervals.csv only
    first.publish(closed(step, 1000, a=[row(5)]), late={})
    kept = (tmp_path / "intervals.csv").read_text()
    assert [e.kind.value for e in first.watchers.events] == ["disk_full"]
    # The controller dies; the next one takes the run over from its journal.
    second = pipeline(tmp_path)
    second.resume(recover(tmp_path), lambda name: step)
    second.publish(closed(step, 2000, a=[row(5)]), late={})
    assert (tmp_path / "intervals.csv").read_text() == kept, "no gap: written no more"
    assert second.trouble.incomplete == ("intervals.csv",) and second.totals.total().requests == 15
    assert [e.kind.value for e in second.watchers.events] == ["disk_full"], "told once, by the first controller"


@pytest.mark.process
def test_the_run_directory_writer_goes_on_past_a_full_disk(tmp_path):
    told = []
    with small_disk(tmp_path / "disk", 256) as disk:
        run_dir = disk / "run"
        trouble = DiskTrouble(run_dir, on_first=told.append)
        writer = RunDirWriter(run_dir, ["http://t:1"], trouble=trouble)
        step = window("main", start_ms=0, seconds=1000)
        fill(disk, leave_bytes=16_384)
        for i in range(200):  # never raises
            writer.on_interval(interval(step, i * 1000, a=[row(5, latencies=[1000 + j for j in range(50)])]))
        assert {"intervals.csv", "latency.hlog"} <= set(trouble.incomplete) and len(told) == 1
        rows = list(csv.DictReader((run_dir / "intervals.csv").open()))
        starts = sorted({int(r["interval_start_ms"]) for r in rows})
        assert starts == list(range(0, len(starts) * 1000, 1000)), "whole intervals, from the first on"
        assert writer.offsets.intervals == (run_dir / "intervals.csv").stat().st_size
        writer.close()


@pytest.mark.process
def test_an_artifact_chunk_the_disk_cannot_take_gives_its_room_back(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        store_artifact_chunk(disk, "a1", "report.zip", b"PK" * 1000, last=False)
        fill(disk, leave_bytes=0)
        with pytest.raises(OSError):
            store_artifact_chunk(disk, "a1", "report.zip", b"PK" * 100_000, last=False)
        assert not list((disk / "gatling" / "a1").iterdir())


def test_the_disk_is_named_by_its_mount_point_device_and_room(tmp_path):
    text = describe_disk(tmp_path)
    assert text.startswith(f"the disk of {tmp_path} (") and "mounted at /" in text and " free)" in text
