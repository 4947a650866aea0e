"""drain_wakeups: grpc.aio's wake-up reader wrapped on a real server's loop, and the wrapper
reading all waiting bytes but one before the handler reads its own (real sockets)."""

from __future__ import annotations

import asyncio
import socket

import grpc

from loadfleet.wire import aiowake


def grpc_reader(loop: asyncio.AbstractEventLoop):
    """The reader callbacks registered on `loop`, by file descriptor."""
    return {key.fd: key.data[0]._callback for key in loop._selector.get_map().values() if key.data and key.data[0]}


def test_it_wraps_grpcs_reader_once_and_the_server_still_answers():
    async def main():
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            loop = asyncio.get_running_loop()
            before = grpc_reader(loop)
            assert aiowake.drain_wakeups() and aiowake.drain_wakeups()
            after = grpc_reader(loop)
            changed = [fd for fd in before if before[fd] is not after[fd]]
            assert len(changed) == 1  # grpc's reader, and only it, wrapped once
            assert after[changed[0]].wrapped is before[changed[0]]
            # Completions still reach Python: a channel connects and a call gets its answer.
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await asyncio.wait_for(channel.channel_ready(), 10)
                call = channel.unary_unary("/no.Such/Method")
                try:
                    await asyncio.wait_for(call(b""), 10)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() is grpc.StatusCode.UNIMPLEMENTED
        finally:
            await server.stop(0)

    asyncio.run(main())


def test_without_grpc_on_the_loop_it_changes_nothing():
    async def main():
        loop = asyncio.get_running_loop()
        before = grpc_reader(loop)
        assert not aiowake.drain_wakeups()
        assert grpc_reader(loop) == before

    asyncio.run(main())


def test_the_wrapper_leaves_exactly_one_byte_for_the_handler():
    reader, writer = socket.socketpair()
    with reader, writer:
        handled: list[bytes] = []

        def handle_events() -> None:  # what grpc's handler does first: one byte, blocking
            handled.append(reader.recv(1))

        wrapper = aiowake._draining(reader.fileno(), handle_events)
        writer.send(b"1" * 300)
        wrapper()
        assert handled == [b"1"] and aiowake._waiting_bytes(reader.fileno()) == 0
        writer.send(b"1")  # one byte: nothing to drain, the handler takes it
        wrapper()
        assert handled == [b"1", b"1"] and aiowake._waiting_bytes(reader.fileno()) == 0
