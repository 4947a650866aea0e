import asyncio

import pytest

from loadfleet.wire.framing import FramingError, encode_varint, frame, read_frame


@pytest.mark.parametrize(
    "value, encoded", [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02")]
)
def test_varint(value, encoded):
    assert encode_varint(value) == encoded


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def test_frames_round_trip_and_clean_eof():
    async def go():
        reader = _reader(frame(b"hello") + frame(b"") + frame(b"x" * 1000))
        return [await read_frame(reader) for _ in range(4)]

    assert asyncio.run(go()) == [b"hello", b"", b"x" * 1000, None]


@pytest.mark.parametrize("data", [b"\x05ab", b"\x80"])
def test_truncated_stream_is_an_error(data):
    async def go():
        return await read_frame(_reader(data))

    with pytest.raises(FramingError):
        asyncio.run(go())


def test_parse_frames_leaves_an_incomplete_tail():
    from loadfleet.wire.framing import frame, parse_frames

    data = frame(b"a") + frame(b"bcd") + frame(b"xyz")[:2]
    frames, used = parse_frames(data)
    assert frames == [b"a", b"bcd"] and used == len(frame(b"a") + frame(b"bcd"))
    assert parse_frames(data, limit=1) == ([b"a"], 2)
