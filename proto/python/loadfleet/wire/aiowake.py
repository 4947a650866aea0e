"""Keeps grpc.aio's completion events flowing when they come faster than the event loop turns.

grpc.aio (grpcio 1.85, `PollerCompletionQueue` in _cygrpc/aio/completion_queue.pyx.pxi)
hands grpc-core's completion events to asyncio through a socket pair: its poller thread
queues each event and writes one byte to wake the loop, and the loop's reader callback reads
**one** byte and then handles every queued event. So each turn of the loop takes one byte out
however many it handled, and the bytes pile up whenever events come faster than the loop
turns (a controller with 1,000 agents has ~8,000 a second). A one-byte write takes a whole
socket buffer entry, so after a few hundred the socket is full and the poller thread blocks
in write() with an event in hand: from then on one completion reaches Python per loop turn,
and every read, write and heartbeat answer of every session waits its turn. At 1,000 agents
× 10 rows that made lease renewals 0.2 s late at the median and over 1 s at the 99th
percentile while the loop was only 60 % busy (bench/fleet, docs/benchmarks.md).

`drain_wakeups(loop)` wraps that reader callback so it first reads all the bytes waiting but
one (FIONREAD says how many), then lets grpc read the last one and handle the events. Bytes
are written after their event is queued, so every byte taken out belongs to an event the
handler then finds. The socket never fills and the poller never blocks.

It relies on grpc.aio's internals, so it checks what it finds: when the loop has no reader
that is grpc's `_handle_events` (another grpcio, or no grpc.aio object made yet), it changes
nothing and says so.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import logging
import os
import termios
from collections.abc import Callable

log = logging.getLogger(__name__)

_GRPC_HANDLER = "_handle_events"


def _waiting_bytes(fd: int) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count, True)
    return count[0]


def _draining(fd: int, handle_events: Callable[[], None]) -> Callable[[], None]:
    def drain_then_handle() -> None:
        extra = _waiting_bytes(fd) - 1
        while extra > 0:  # the socket is the loop's alone to read: these bytes stay there
            extra -= len(os.read(fd, extra))
        handle_events()

    drain_then_handle.wrapped = handle_events  # type: ignore[attr-defined]  # found again by the next call
    return drain_then_handle


def drain_wakeups(loop: asyncio.AbstractEventLoop | None = None) -> bool:
    """Wraps grpc.aio's wake-up reader on `loop` (the running loop by default) as the module
    docstring says; True if it found it (or had already wrapped it). Call it after the first
    grpc.aio server or channel exists on the loop: that creates the completion queue."""
    loop = loop or asyncio.get_running_loop()
    selector = getattr(loop, "_selector", None)  # asyncio's selector loops; others: nothing to do
    if selector is None:
        return False
    for key in list(selector.get_map().values()):
        reader = key.data[0] if key.data else None
        callback = getattr(reader, "_callback", None)
        if getattr(callback, "wrapped", None) is not None:
            return True
        method = getattr(callback, "func", callback)  # grpcio 1.85 registers partial(_handle_events, loop)
        owner = type(getattr(method, "__self__", None)).__name__
        is_grpcs = getattr(method, "__name__", "") == _GRPC_HANDLER and owner == "PollerCompletionQueue"
        if callback is not None and is_grpcs:
            loop.add_reader(key.fd, _draining(key.fd, callback))
            return True
    log.info("grpc.aio's wake-up socket not found on this loop: left as it is")
    return False
