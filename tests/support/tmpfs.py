"""A small tmpfs a test mounts and removes: a real file system that fills up (ENOSPC)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(mount_point: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of `size_kib` KiB at `mount_point`, unmounted (lazily, should a process still
    hold a file in it) and removed afterwards, even when the test fails. Skips the test
    without root, which mounting needs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
        mount_point.rmdir()


def fill(directory: Path, leave_bytes: int) -> Path:
    """A file taking all but about `leave_bytes` of the file system's free space."""
    st = os.statvfs(directory)
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave_bytes))
    return filler


def free_bytes(directory: Path) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize
