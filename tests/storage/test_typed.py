"""Typed logs: codecs for keys and values (JSON, str, varint, bytes, a custom one)."""

from __future__ import annotations

import json

import pytest

from seglog import OFFSET_OLDEST
from seglog.aio import consume_blocking_async
from seglog.errors import NoIndexError
from seglog.storage import (
    BYTES,
    JSON,
    STR,
    VARINT,
    TypedLog,
    TypedMessage,
    open_typed_log,
)


def test_builtin_codecs_round_trip():
    for n in (0, 1, -1, 63, -64, 64, 300, -(1 << 63), (1 << 63) - 1):
        assert VARINT.decode(VARINT.encode(n)) == n
    assert VARINT.encode(0) == b"\x00"
    assert VARINT.encode(-1) == b"\x01"
    assert VARINT.encode(150) == b"\xac\x02"  # zigzag 300, protobuf's example layout
    assert len(VARINT.encode(-(1 << 63))) == 10
    for bad in (b"", b"\x80", b"\x01\x02"):
        with pytest.raises(ValueError, match="varint"):
            VARINT.decode(bad)
    with pytest.raises(ValueError, match="64-bit"):
        VARINT.encode(1 << 63)
    assert STR.decode(STR.encode("héllo")) == "héllo"
    assert JSON.encode({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert BYTES.encode(b"x") == b"x"
    with pytest.raises(json.JSONDecodeError):
        JSON.decode(b"{nope")


def test_open_typed_log(tmp_path):
    with open_typed_log(tmp_path / "t", STR, JSON, create=True, key_index=True) as log:
        assert isinstance(log, TypedLog)
        assert log.publish([TypedMessage(key="k", value={"a": 1})]) == 1
    with open_typed_log(tmp_path / "t", STR, JSON, key_index=True) as log:
        assert log.get_by_key("k").value == {"a": 1}


def test_typed_log_publish_consume_get_by_key(make_log):
    with TypedLog(make_log(key_index=True), STR, JSON) as log:
        assert isinstance(log, TypedLog)
        nxt = log.publish(
            [
                TypedMessage(key="user-1", value={"clicks": 1}),
                TypedMessage(key="user-2", value=[1, 2]),
                TypedMessage(key="user-1", value={"clicks": 3}, headers=[("h", b"v")]),
                TypedMessage(key="user-2", value=None),  # tombstone: no codec call
            ]
        )
        assert nxt == 4 == log.next_offset()
        nxt, msgs = log.consume(OFFSET_OLDEST, 10)
        assert nxt == 4
        assert [(m.key, m.value) for m in msgs] == [
            ("user-1", {"clicks": 1}),
            ("user-2", [1, 2]),
            ("user-1", {"clicks": 3}),
            ("user-2", None),
        ]
        assert msgs[2].headers == (("h", b"v"),)
        assert log.get(1).value == [1, 2]
        assert log.get_by_key("user-1").value == {"clicks": 3}
        assert log.offset_by_key("user-2") == 3
        assert [m.offset for m in log.consume_by_key("user-1", 0, 10)[1]] == [0, 2]
        assert log.consume_blocking(4, 10, 0.01) == (4, [])
        assert log.sync() == 4
        # stored bytes are the codecs' output
        raw = log.log.get(0)
        assert (raw.key, raw.value) == (b"user-1", b'{"clicks":1}')


async def test_typed_async_and_custom_codec(make_log):
    class Upper:
        """A custom codec: any object with encode/decode."""

        def encode(self, value: str) -> bytes:
            return value.upper().encode()

        def decode(self, data: bytes) -> str:
            return data.decode().lower()

    log = TypedLog(make_log(), VARINT, Upper())
    with log:
        log.publish([TypedMessage(key=-5, value="abc", timestamp=1000)])
        assert log.log.get(0).value == b"ABC"
        nxt, msgs = await consume_blocking_async(log, 0, 10, 1)
        assert (nxt, msgs[0].key, msgs[0].value, msgs[0].timestamp) == (1, -5, "abc", 1000)
        assert log.offset_by_time(999) == (0, 1000)
        with pytest.raises(NoIndexError):
            log.get_by_key(-5)
