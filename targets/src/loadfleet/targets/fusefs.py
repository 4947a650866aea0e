"""The FUSE filesystem of `python -m loadfleet.targets.fusemount` (the child process): mfusepy
operations whose calls are NFSv4.0 calls of one nfs-rs client, read-only. Only `fusemount.serve`
imports this module, so the parent process (the lab) needs neither libfuse nor nfs-rs."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import Any, TypeVar, cast

import mfusepy
import nfs_rs

from .fusemount import CTO_ENTRY_TIMEOUT_S, MAX_IDLE_FILES, OpenFiles, log

Method = TypeVar("Method", bound=Callable[..., Any])


def fuse_errors(method: Method) -> Method:
    """nfs-rs errors -> errno for the kernel (one place for the translation)."""

    def wrapper(self: NfsReadOnlyFs, *args: Any) -> Any:
        try:
            return method(self, *args)
        except mfusepy.FuseOSError:
            raise
        except nfs_rs.NfsNotFoundError:
            raise mfusepy.FuseOSError(errno.ENOENT) from None
        except nfs_rs.NfsPermissionError:
            raise mfusepy.FuseOSError(errno.EACCES) from None
        except nfs_rs.NfsNotADirectoryError:
            raise mfusepy.FuseOSError(errno.ENOTDIR) from None
        except nfs_rs.NfsIsADirectoryError:
            raise mfusepy.FuseOSError(errno.EISDIR) from None
        except nfs_rs.NfsTimeoutError:
            raise mfusepy.FuseOSError(errno.ETIMEDOUT) from None
        except nfs_rs.NfsError as exc:
            log.warning("%s%s: %s", method.__name__, args[:1], exc)
            raise mfusepy.FuseOSError(errno.EIO) from None

    wrapper.__name__ = method.__name__
    return cast(Method, wrapper)


def _close_quietly(handle: nfs_rs.File) -> None:
    try:
        handle.close()
    except nfs_rs.NfsError as exc:
        log.warning("close %s: %s", handle.name, exc)


class NfsReadOnlyFs(mfusepy.Operations):  # type: ignore[misc]  # mfusepy has no type information
    """getattr/readdir/open/read/release over one nfs-rs client."""

    use_ns = True

    def __init__(self, client: nfs_rs.Client, export: str, *, attr_timeout_s: float, cache: str):
        self.client, self.export = client, export
        self.attr_timeout_s, self.cache = attr_timeout_s, cache
        # Only a warm mount keeps remote files open: otherwise each open is an NFS OPEN.
        self.files: OpenFiles[nfs_rs.File] = OpenFiles(
            lambda path: client.open(path, "rb"), _close_quietly, max_idle=MAX_IDLE_FILES if cache == "warm" else 0
        )
        self.mounted = False

    def _remote(self, path: str) -> str:
        return f"{self.export}/{path.lstrip('/')}".strip("/")

    def init_with_config(self, conn_info: Any, config: Any) -> None:
        self.mounted = True
        if config is None:
            return
        timeout = self.attr_timeout_s if self.cache == "warm" else 0.0
        config.attr_timeout = config.entry_timeout = config.negative_timeout = timeout
        config.kernel_cache = 1 if self.cache == "warm" else 0
        config.direct_io = 0
        if self.cache == "close-to-open":
            config.entry_timeout = CTO_ENTRY_TIMEOUT_S
            # At every open libfuse asks getattr (ac_attr_timeout 0) and keeps the pages
            # only if size and mtime are unchanged.
            config.auto_cache = 1
            config.ac_attr_timeout_set, config.ac_attr_timeout = 1, 0.0

    @fuse_errors
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        info = self.client.stat(self._remote(path) or ".")
        kind = stat.S_IFDIR if info.type == nfs_rs.FileType.DIRECTORY else stat.S_IFREG
        if info.type not in (nfs_rs.FileType.DIRECTORY, nfs_rs.FileType.FILE):
            kind = stat.S_IFLNK if info.type == nfs_rs.FileType.SYMLINK else stat.S_IFREG
        return {
            "st_mode": kind | (info.mode & 0o7777),
            "st_nlink": info.nlink,
            "st_size": info.size,
            "st_uid": info.uid,
            "st_gid": info.gid,
            "st_ino": info.fileid,
            "st_blocks": (info.used + 511) // 512,
            "st_atime": info.atime,
            "st_mtime": info.mtime,
            "st_ctime": info.ctime,
        }

    @fuse_errors
    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *self.client.listdir(self._remote(path))]

    @fuse_errors
    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise mfusepy.FuseOSError(errno.EROFS)
        return self.files.acquire(self._remote(path))

    @fuse_errors
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return self.files.get(fh).read_at(offset, size)

    def release(self, path: str, fh: int) -> int:
        self.files.release(fh)
        return 0

    def destroy(self, path: str) -> None:
        self.files.close_all()

    def statfs(self, path: str) -> dict[str, Any]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_namemax": 255}
