"""A read-only NFS export mounted as a local directory, without a kernel NFS client: a small
FUSE filesystem (mfusepy) whose operations are NFSv4.0 calls (nfs-rs). nginx can serve a
docroot from the mount point like any directory.

    python -m loadfleet.targets.fusemount nfs://127.0.0.1/export?version=4.0&nfsport=2049 MOUNTPOINT

runs in the foreground until SIGTERM, then unmounts. `FuseMount` starts that process, waits
until the mount is visible, and stops it by PID (with `fusermount3 -u` as a fallback).

Caching, three ways (`MountCache`):
- `warm` (default): a docroot does not change while it is served, so the kernel keeps
  attributes and directory entries for `attr_timeout_s` and file pages until the mount ends
  (`kernel_cache`), and remote files stay open between uses;
- `close-to-open` (`--close-to-open`): as a kernel NFS client mounts by default — every open
  asks the server (GETATTR, then an NFSv4 OPEN, and a CLOSE at the end), and the file's pages
  are kept only while its size and mtime are unchanged (libfuse's `auto_cache`), so a file
  changed on the server is served changed and NFS stays in every request's path;
- `none` (`--no-cache`): every stat, open and read goes to the server.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

from .daemon import LabError, Launcher, find_program, log_tail, spawn, stop_pid

MOUNT_CACHES = ("warm", "close-to-open", "none")
DEFAULT_ATTR_TIMEOUT_S = 60.0
CTO_ENTRY_TIMEOUT_S = 1.0  # close-to-open: names are looked up again after this; attributes at every stat
MAX_IDLE_FILES = 1024  # remote files kept open after their last FUSE release (see OpenFiles)
MOUNT_TIMEOUT_S = 15.0
# For NginxServer(extra_conf=...) on a mount: nginx keeps the files open, so requests stop
# crossing into the FUSE process at all (measured: ~7x the requests per second).
NGINX_OPEN_FILE_CACHE = "        open_file_cache max=10000 inactive=60s;\n        open_file_cache_valid 60s;\n"
FSNAME = "loadfleet-nfs"

log = logging.getLogger("loadfleet.fusemount")


def split_export_url(url: str) -> tuple[str, str]:
    """`nfs://HOST/export?version=4.0&nfsport=P` -> (`nfs://HOST/?version=4.0&nfsport=P`, `export`).

    nfs-rs mounts the NFSv4 pseudo root; paths under it name the export."""
    parts = urlsplit(url)
    if parts.scheme != "nfs" or not parts.hostname:
        raise ValueError(f"'{url}' is not an nfs://HOST/PATH URL")
    return urlunsplit((parts.scheme, parts.netloc, "/", parts.query, "")), parts.path.strip("/")


# ---------------------------------------------------------------- the filesystem (child process)
# The filesystem itself is fusefs.py, imported by `serve` only: the parent needs no libfuse.


Handle = TypeVar("Handle")


class OpenFiles(Generic[Handle]):
    """Remote open files, shared by every FUSE open of the same path.

    nginx opens the file for each request; an NFS OPEN and CLOSE per request (two round trips
    through Python) would cost more than serving the bytes. A handle stays open while any FUSE
    open uses it, and up to `max_idle` unused handles stay open after (least recently used
    closed first; 0: close at last release). The export is read-only, so a kept handle does not
    serve stale content. `acquire` returns a FUSE file handle (an int) for `get` and `release`.
    """

    def __init__(self, open_remote: Callable[[str], Handle], close_remote: Callable[[Handle], None], *, max_idle: int):
        self._open, self._close, self.max_idle = open_remote, close_remote, max_idle
        self._lock = threading.Lock()
        self._handles: dict[str, Handle] = {}
        self._users: dict[str, int] = {}
        self._idle: OrderedDict[str, None] = OrderedDict()
        self._paths: dict[int, str] = {}
        self._next_fh = itertools.count(1)

    def acquire(self, path: str) -> int:
        with self._lock:
            if path in self._handles:
                return self._use(path)
        handle = self._open(path)  # a round trip: not under the lock
        with self._lock:
            if path in self._handles:  # another thread opened it meanwhile
                spare = handle
            else:
                self._handles[path], self._users[path], spare = handle, 0, None
            fh = self._use(path)
        if spare is not None:
            self._close(spare)
        return fh

    def _use(self, path: str) -> int:
        self._users[path] += 1
        self._idle.pop(path, None)
        fh = next(self._next_fh)
        self._paths[fh] = path
        return fh

    def get(self, fh: int) -> Handle:
        with self._lock:
            return self._handles[self._paths[fh]]

    def release(self, fh: int) -> None:
        closing = []
        with self._lock:
            path = self._paths.pop(fh, None)
            if path is None:
                return
            self._users[path] -= 1
            if self._users[path] == 0:
                self._idle[path] = None
            while len(self._idle) > self.max_idle:
                oldest, _ = self._idle.popitem(last=False)
                del self._users[oldest]
                closing.append(self._handles.pop(oldest))
        for handle in closing:
            self._close(handle)

    def open_count(self) -> int:
        with self._lock:
            return len(self._handles)

    def close_all(self) -> None:
        with self._lock:
            handles = list(self._handles.values())
            self._handles.clear()
            self._users.clear()
            self._idle.clear()
            self._paths.clear()
        for handle in handles:
            self._close(handle)


def serve(url: str, mountpoint: Path, *, attr_timeout_s: float, cache: str) -> int:
    """Mounts and serves until SIGTERM/SIGINT (libfuse then unmounts). Returns an exit code.

    As root the mount is `allow_other`: Apache's children run as www-data and must read it
    (root needs no `user_allow_other` in /etc/fuse.conf). Otherwise every lab server runs as
    the mounting user, which a FUSE mount always lets in; asking for allow_other there would
    fail without that fuse.conf line."""
    import mfusepy
    import nfs_rs

    from .fusefs import NfsReadOnlyFs

    root_url, export = split_export_url(url)
    try:
        client = nfs_rs.Client.connect(root_url, connect_timeout=10, operation_timeout=30)
        if export and client.stat(export).type != nfs_rs.FileType.DIRECTORY:
            raise nfs_rs.NfsNotADirectoryError(message=f"{export} is not a directory")
    except (nfs_rs.NfsError, OSError) as exc:
        print(f"fusemount: cannot reach {url}: {exc}", file=sys.stderr)
        return 1
    filesystem = NfsReadOnlyFs(client, export, attr_timeout_s=attr_timeout_s, cache=cache)
    try:
        mfusepy.FUSE(
            filesystem,
            str(mountpoint),
            foreground=True,
            ro=True,
            allow_other=os.geteuid() == 0,
            fsname=FSNAME,
            subtype="nfs",
        )
    except RuntimeError as exc:
        # libfuse >= 3.16 reports the end of its loop by SIGTERM as an error (8): normal after a mount.
        if not filesystem.mounted:
            print(f"fusemount: cannot mount {mountpoint}: libfuse error {exc}", file=sys.stderr)
            return 1
    finally:
        client.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadfleet.targets.fusemount",
        description="Mount an NFSv4 export read-only through FUSE (foreground).",
    )
    parser.add_argument("url", help="nfs://HOST/EXPORT?version=4.0&nfsport=PORT")
    parser.add_argument("mountpoint", type=Path, help="an empty directory")
    parser.add_argument(
        "--attr-timeout-s",
        type=float,
        default=DEFAULT_ATTR_TIMEOUT_S,
        help=f"how long the kernel caches attributes and entries (default {DEFAULT_ATTR_TIMEOUT_S:g})",
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--no-cache", action="store_true", help="no kernel caching: every stat and read goes to NFS")
    modes.add_argument(
        "--close-to-open",
        action="store_true",
        help="as a kernel NFS client: every open revalidates with the server; pages kept while unchanged",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        split_export_url(args.url)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.mountpoint.is_dir():
        parser.error(f"{args.mountpoint} is not a directory")
    cache = "none" if args.no_cache else "close-to-open" if args.close_to_open else "warm"
    return serve(args.url, args.mountpoint.resolve(), attr_timeout_s=args.attr_timeout_s, cache=cache)


# ---------------------------------------------------------------- the parent side


def is_mounted(mountpoint: Path) -> bool:
    """Whether `mountpoint` is in this mount namespace's /proc/mounts."""
    target = str(Path(mountpoint).resolve())
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 1 and _unescape(fields[1]) == target:
                return True
    return False


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


class FuseMount:
    """The FUSE process for one mount, started and stopped by PID.

    `mountpoint` must be a fresh, empty directory (created if missing): a FUSE daemon stopped
    by signal unmounts its path by name, so reusing a path could unmount someone else's mount.
    `launcher` (e.g. `netns.Host`) runs the process in another network namespace; it must keep
    the mount namespace (nsenter --net only), so the mount is visible here. `cache`: one of
    `MOUNT_CACHES` (True and False, as before: `warm` and `none`). `name`: the lab's name for it.
    """

    kind = "fuse"

    def __init__(
        self,
        url: str,
        mountpoint: Path,
        *,
        log_path: Path | None = None,
        attr_timeout_s: float = DEFAULT_ATTR_TIMEOUT_S,
        cache: str | bool = "warm",
        launcher: Launcher | None = None,
        name: str = "nfs-mount",
    ):
        split_export_url(url)
        if isinstance(cache, bool):
            cache = "warm" if cache else "none"
        if cache not in MOUNT_CACHES:
            raise ValueError(f"cache '{cache}' is not one of {', '.join(MOUNT_CACHES)}")
        self.url, self.mountpoint = url, Path(mountpoint).resolve()
        self.log = Path(log_path) if log_path else self.mountpoint.with_name(self.mountpoint.name + ".log")
        self.attr_timeout_s, self.cache, self.launcher, self.name = attr_timeout_s, cache, launcher, name
        self.pid: int | None = None

    @property
    def pids(self) -> list[int]:
        return [self.pid] if self.pid else []

    def argv(self) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "loadfleet.targets.fusemount",
            self.url,
            str(self.mountpoint),
            "--attr-timeout-s",
            f"{self.attr_timeout_s:g}",
        ]
        return argv + {"warm": [], "close-to-open": ["--close-to-open"], "none": ["--no-cache"]}[self.cache]

    def start(self) -> None:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        if is_mounted(self.mountpoint) or any(self.mountpoint.iterdir()):
            raise LabError(f"fuse mount: {self.mountpoint} is not a fresh, empty directory")
        self.log.write_text("")
        proc = (self.launcher.spawn if self.launcher else spawn)(self.argv(), log=self.log)
        self.pid = proc.pid
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not is_mounted(self.mountpoint):
            if proc.poll() is not None:
                self.pid = None
                raise LabError(f"fuse mount of {self.url} exited at start: {log_tail(self.log)}")
            if time.monotonic() > deadline:
                self.stop()
                raise LabError(
                    f"fuse mount of {self.url} did not appear at {self.mountpoint} "
                    f"within {MOUNT_TIMEOUT_S:g} s: {log_tail(self.log)}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM (libfuse unmounts on it), then `fusermount3 -u` if the mount is still there;
        idempotent."""
        if self.pid is not None:
            stop_pid(self.pid)
            self.pid = None
        if is_mounted(self.mountpoint):
            unmount(self.mountpoint)

    def __enter__(self) -> FuseMount:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def unmount(mountpoint: Path) -> None:
    """`fusermount3 -u`, lazily (-z) if the mount is busy; raises LabError if it stays."""
    program = find_program("fusermount3", "fuse3", extra_dirs=("/usr/bin", "/bin"))
    for extra in ([], ["-z"]):
        subprocess.run([program, "-u", *extra, str(mountpoint)], capture_output=True, timeout=10)
        if not is_mounted(mountpoint):
            return
    raise LabError(f"could not unmount {mountpoint}")


__all__ = [
    "DEFAULT_ATTR_TIMEOUT_S",
    "MOUNT_CACHES",
    "NGINX_OPEN_FILE_CACHE",
    "FuseMount",
    "is_mounted",
    "main",
    "split_export_url",
    "unmount",
]

if __name__ == "__main__":
    sys.exit(main())
