"""``decode_columns(borrow=True)`` decodes a reused read buffer where it lies: the same
columns as from bytes, the buffer a view of the caller's, keys/values/headers still bytes."""

from __future__ import annotations

import numpy as np

from seglog.storage import Message, decode_columns
from seglog.storage.record.message import encode_messages


def test_borrowed_buffer_decodes_the_same() -> None:
    msgs = [
        Message(
            key=b"k%d" % i,
            value=b"v" * (i % 9),
            timestamp=1000 + 7 * i,
            headers=(("h", b"x"),) if i % 5 == 0 else (),
        )
        for i in range(300)
    ]
    data = encode_messages(msgs, 1 << 20)  # one batch, offsets 0..299
    buffer = bytearray(len(data) + 64)  # a reused buffer: larger than what was read
    buffer[: len(data)] = data
    view = memoryview(buffer)[: len(data)]
    copied = decode_columns(data, 3, 290)
    borrowed = decode_columns(view, 3, 290, borrow=True)
    assert isinstance(borrowed.buffer, memoryview)
    assert np.shares_memory(
        np.frombuffer(borrowed.buffer, np.uint8), np.frombuffer(buffer, np.uint8)
    )
    for name in ("offsets", "timestamps", "key_positions", "value_lengths", "header_counts"):
        assert (getattr(borrowed, name) == getattr(copied, name)).all()
    keys = borrowed.keys()
    assert keys == copied.keys()
    assert all(type(k) is bytes for k in keys)
    assert borrowed.values() == copied.values()
    assert borrowed.headers() == copied.headers()
    assert isinstance(decode_columns(view, 3, 290).buffer, bytes)  # not borrowed: copied
