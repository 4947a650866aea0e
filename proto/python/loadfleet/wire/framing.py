"""Length-delimited protobuf framing for the engine's stdio protocol: each message is
a varint byte length followed by the message (protobuf's writeDelimitedTo format)."""

from __future__ import annotations

import asyncio

# A frame larger than this is a corrupted stream, not a message.
MAX_FRAME_BYTES = 64 * 1024 * 1024


class FramingError(Exception):
    """The byte stream is not a sequence of length-delimited messages."""


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def frame(payload: bytes) -> bytes:
    return encode_varint(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """Reads one frame; None at a clean end of stream (EOF before a length byte)."""
    length = 0
    for shift in range(0, 64, 7):
        byte = await reader.read(1)
        if not byte:
            if shift == 0:
                return None
            raise FramingError("stream ended inside a frame length")
        length |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            break
    else:
        raise FramingError("frame length varint is too long")
    if length > MAX_FRAME_BYTES:
        raise FramingError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise FramingError("stream ended inside a frame") from exc


def parse_frames(data: bytes, limit: int | None = None) -> tuple[list[bytes], int]:
    """Complete frames at the start of `data` (at most `limit`), and the bytes they use.
    An incomplete frame at the end is left for the caller (it may still be growing)."""
    frames: list[bytes] = []
    pos = 0
    while pos < len(data) and (limit is None or len(frames) < limit):
        length, shift, cursor = 0, 0, pos
        while True:
            if cursor >= len(data):
                return frames, pos
            byte = data[cursor]
            cursor += 1
            length |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift >= 64:
                raise FramingError(f"frame length varint is too long at byte {pos}")
        if length > MAX_FRAME_BYTES:
            raise FramingError(f"frame of {length} bytes at byte {pos} exceeds {MAX_FRAME_BYTES}")
        if cursor + length > len(data):
            return frames, pos
        frames.append(data[cursor : cursor + length])
        pos = cursor + length
    return frames, pos
