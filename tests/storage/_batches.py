"""Helpers for the storage tests: real record batches built by kafka-python."""

from __future__ import annotations

import time

from kafka.record.default_records import DefaultRecordBatchBuilder

import seglog.storage  # noqa: F401  (imports kafka-python quietly first, see _message.py)

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def make_batch(
    n: int = 3,
    *,
    codec: str = "none",
    value_size: int = 20,
    timestamp: int | None = None,
    tag: bytes = b"",
) -> bytes:
    """One record batch v2 of ``n`` records (offsets 0..n-1) built by kafka-python."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
    for i in range(n):
        value = (tag + b"-%d-" % i).ljust(value_size, b"x")
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=value, headers=[("h", b"v")])
    return bytes(b.build())


def txn_batch(
    producer_id: int,
    n: int = 3,
    *,
    epoch: int = 0,
    sequence: int = 0,
    tag: bytes = b"",
    key_prefix: bytes = b"k",
    timestamp: int | None = None,
) -> bytes:
    """A transactional record batch v2 of ``n`` records of ``producer_id`` (kafka-python),
    all with ``timestamp`` (ms; default now)."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 30,
    )
    now = int(time.time() * 1000) if timestamp is None else timestamp
    for i in range(n):
        b.append(i, now, key_prefix + b"%d" % i, tag + b"p%d-%d" % (producer_id, i), [])
    return bytes(b.build())
