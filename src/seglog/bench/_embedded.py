"""Embedded API measurements: ``Log.publish`` and ``Log.consume`` of small messages.

The next issue's metric (klevdb's benchmark shape): 100 B values with a short key,
published in batches of 1000 with the default durability (each ``publish`` returns once its
batch is fsynced), then consumed back 1000 at a time from the oldest offset.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from seglog.bench._kafka import BenchError, Rate
from seglog.storage import OFFSET_OLDEST, Message, open_log

__all__ = ["embedded_publish_consume"]


def embedded_publish_consume(
    directory: Path, count: int, value_size: int = 100, batch: int = 1000
) -> tuple[Rate, Rate]:
    """Publish ``count`` messages (key ``b"key-NNNN"``, ``value_size`` random bytes) to a
    new log in ``directory`` in batches of ``batch``, then consume them all in batches of
    ``batch``. Returns ``(publish rate, consume rate)``; the message objects are built
    before the publish clock starts. Raises BenchError if fewer messages come back."""
    value = os.urandom(value_size)
    groups = [
        [
            Message(key=b"key-%04d" % (i % 1000), value=value)
            for i in range(lo, min(lo + batch, count))
        ]
        for lo in range(0, count, batch)
    ]
    with open_log(directory, create=True) as log:
        start = time.perf_counter()
        for group in groups:
            log.publish(group)
        published = time.perf_counter() - start

        seen = size = 0
        offset = OFFSET_OLDEST
        start = time.perf_counter()
        while seen < count:
            offset, messages = log.consume(offset, batch)
            if not messages:
                raise BenchError(f"consume returned {seen}/{count} messages")
            seen += len(messages)
            size += sum(len(m.value or b"") for m in messages)
        consumed = time.perf_counter() - start
    return Rate(count, count * value_size, published), Rate(seen, size, consumed)
