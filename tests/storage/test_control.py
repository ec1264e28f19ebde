"""Control batches (transaction markers) against kafka-python's record reader."""

from __future__ import annotations

import struct
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

import seglog.storage
from seglog.errors import CorruptRecordError
from seglog.storage import (
    control_marker,
    encode_control_batch,
    is_control_batch,
    is_transactional_batch,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords

from ._batches import make_batch


@given(
    st.integers(0, (1 << 63) - 1),
    st.integers(0, (1 << 15) - 1),
    st.booleans(),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.integers(0, 1 << 45),
)
def test_kafka_python_reads_the_marker(pid, epoch, commit, coordinator_epoch, ts):
    raw = encode_control_batch(
        pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp_ms=ts
    )
    assert len(raw) == 78
    records = MemoryRecords(raw)
    batch = records.next_batch()
    assert batch is not None

    assert batch.validate_crc()
    assert batch.is_control_batch
    assert batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, -1)
    assert batch.base_offset == 0
    assert batch.last_offset_delta == 0
    assert batch.max_timestamp == ts
    (record,) = list(batch)
    assert record.commit is commit
    assert record.abort is not commit
    assert record.version == 0
    assert struct.unpack(">hi", record.value) == (0, coordinator_epoch)
    assert records.next_batch() is None
    assert control_marker(raw) == (commit, coordinator_epoch)


def test_attribute_bits():
    assert is_control_batch(0x20)
    assert is_control_batch(0x30)
    assert not is_control_batch(0x10)
    assert is_transactional_batch(0x10)
    assert is_transactional_batch(0x31)
    assert not is_transactional_batch(0x20 | 0x08)


def test_marker_of_a_data_batch_is_none():
    assert control_marker(make_batch(3)) is None


def test_a_broken_marker_is_corrupt():
    raw = bytearray(encode_control_batch(7, 1, commit=True, coordinator_epoch=0, timestamp_ms=0))
    raw[61 + 6] = 9  # key type 9: no such ControlRecordType
    with pytest.raises(CorruptRecordError):
        control_marker(raw)
    with pytest.raises(CorruptRecordError):
        control_marker(raw[:70])


def test_exported():
    for name in ("control_marker", "encode_control_batch", "is_control_batch"):
        assert name in seglog.storage.__all__
