"""A file someone named (a plan's manifest, a token file, a key), read with bounds.

Whoever names the file may name anything: a FIFO would block the reader forever, `/dev/zero`
and `/dev/urandom` never end, a directory is no file. So only a regular file is read (symlinks
followed), checked before it is opened (a device is never opened) and again on the descriptor
that is read (the file may have been replaced in between); it is opened without blocking
(opening a FIFO waits for a writer), and never more than `limit` + 1 bytes are read. A
`private` file (a secret) that other users may read or write is refused, as ssh refuses such
a key; its group may (deployments share secrets with a service's group: 0640, 0440).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["OTHERS_ACCESS", "FileRefused", "read_regular"]

# Permission bits that let users other than the owner and the group at a private file.
OTHERS_ACCESS = stat.S_IRWXO

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(Exception):
    """Why a named file was not read; its text reads after the file's name and a colon."""


def read_regular(path: str | Path, limit: int, *, private: bool = False) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them, or FileRefused."""
    try:
        _check(path, os.stat(path), private=False)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise FileRefused(exc.strerror) from None
    try:
        _check(path, os.fstat(fd), private=private)
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise FileRefused(exc.strerror) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise FileRefused(f"larger than {limit:,} bytes")
    return data


def _check(path: str | Path, info: os.stat_result, *, private: bool) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
        raise FileRefused(f"{kind}, not a regular file")
    if private and info.st_mode & OTHERS_ACCESS:
        raise FileRefused(f"other users may read it (mode {stat.S_IMODE(info.st_mode):04o}): chmod o-rwx {path}")


def _read_at_most(fd: int, n: int) -> bytes:
    chunks = []
    while n > 0 and (chunk := os.read(fd, min(n, 1 << 20))):
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
