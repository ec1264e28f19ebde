"""``seglog.storage.whole_batches``: the one walk over record batch v2 headers (Kafka's
DefaultRecordBatch) that the broker's producer-state recovery and Spark's wire reader use,
checked against kafka-python's own batch reader on the same bytes."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from seglog.storage import parse_header, whole_batches

from ._batches import make_batch


def _log(counts: list[int], codecs: list[str]) -> bytes:
    """Consecutive batches of ``counts`` records (offsets from 0), kafka-python built."""
    out, base = bytearray(), 0
    for n, codec in zip(counts, codecs, strict=True):
        batch = bytearray(make_batch(n, codec=codec))
        struct.pack_into(">q", batch, 0, base)  # baseOffset is not covered by the CRC
        out += batch
        base += n
    return bytes(out)


@given(
    st.lists(st.integers(1, 30), min_size=1, max_size=6),
    st.sampled_from(["none", "gzip", "zstd"]),
    st.integers(0, 400),
)
def test_whole_batches_match_kafka_pythons_reader(counts: list[int], codec: str, cut: int) -> None:
    """Every whole batch, in order, with kafka-python's header fields; a batch cut short
    (a Fetch's byte limit: ``cut`` bytes dropped from the end) is left out."""
    data = _log(counts, [codec] * len(counts))
    shown = data[: max(0, len(data) - cut)]
    found = whole_batches(shown)
    pos, expected = 0, []
    while pos + 12 <= len(shown):
        size = 12 + struct.unpack_from(">i", shown, pos + 8)[0]
        if pos + size > len(shown):
            break
        expected.append((pos, DefaultRecordBatch(shown[pos : pos + size])))
        pos += size
    assert [p for p, _ in found] == [p for p, _ in expected]
    for (pos, h), (_, kp) in zip(found, expected, strict=True):
        assert h == parse_header(shown, pos)
        assert (h.base_offset, h.next_offset, h.size) == (
            kp.base_offset,
            kp.next_offset,
            kp.size_in_bytes,
        )
        assert (h.record_count, h.attributes, h.crc) == (kp.records_count, kp.attributes, kp.crc)
        assert (h.max_timestamp, h.producer_id, h.magic) == (kp.max_timestamp, -1, 2)


def test_the_walk_stops_at_a_length_below_the_header() -> None:
    """A batchLength that would not hold a v2 header ends the walk there (never a loop,
    never an error): the batches before it are returned."""
    data = bytearray(_log([3, 2], ["none", "none"]))
    second = parse_header(data).size
    struct.pack_into(">i", data, second + 8, 10)
    assert [h.base_offset for _, h in whole_batches(data)] == [0]
    assert whole_batches(b"") == []
    assert whole_batches(data[:60]) == []
