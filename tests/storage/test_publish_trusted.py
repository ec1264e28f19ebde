"""The publish path trusts its own encoder (``append(trusted=True)``: headers read, CRCs
not checked again); bytes from outside (``Log.append``: the broker's produce, a user) are
still validated in full, and what publish stores is valid and survives a kill -9."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from seglog.errors import CorruptRecordError
from seglog.storage import Message, decode_columns, encode_records, open_log
from seglog.storage.record.batch import (
    check_batch_crcs,
    encoded_batches,
    validate_for_append,
)


def _batch(n: int = 100) -> bytearray:
    values = [bytes([i % 256]) * 100 for i in range(n)]
    keys = [b"key-%04d" % i for i in range(n)]
    return bytearray(encode_records(values, keys, 1_700_000_000_000, None, 1 << 20))


@pytest.mark.parametrize("where", ["crc field", "record bytes"])
def test_external_batch_with_bad_crc_still_refused(tmp_path, where):
    data = _batch()
    if where == "crc field":
        struct.pack_into(">I", data, 17, struct.unpack_from(">I", data, 17)[0] ^ 1)
    else:
        data[500] ^= 0x40  # a value byte: the stored CRC no longer matches
    with open_log(tmp_path / "p", create=True) as log:
        log.publish_values([b"x" * 100] * 10)
        end = log.log_end_offset
        with pytest.raises(CorruptRecordError, match="CRC"):
            log.append(bytes(data))
        with pytest.raises(CorruptRecordError, match="CRC"):
            log.append(data)  # a bytearray: still validated, still refused
        assert log.log_end_offset == end
        assert log.read(0, 1 << 20) == bytes(next(log.batches(0)))


def test_published_batches_are_valid_stored_batches(tmp_path):
    values = [bytes([i % 256]) * 100 for i in range(1000)]
    keys = [b"key-%04d" % i for i in range(1000)]
    with open_log(tmp_path / "p", create=True, max_message_bytes=50_000) as log:
        log.publish_values(values, keys)  # same-size records, several batches
        log.publish([Message(key=k, value=v) for k, v in zip(keys, values, strict=True)])
        log.publish([Message(value=b"v" * i) for i in range(1, 50)])  # general path
        stored = b"".join(bytes(b) for b in log.batches(0))
        check_batch_crcs(stored)
        assert len(validate_for_append(stored, 50_000)) > 4
        offset, got = log.consume(0, 10_000)
    assert offset == 2049
    assert [m.value for m in got[:1000]] == values
    assert [m.key for m in got[1000:2000]] == keys


def test_encoded_batches_reads_headers_without_checks():
    data = _batch() + _batch(7)
    found = encoded_batches(data)
    assert [(pos, h.record_count) for pos, h in found] == [
        (0, 100),
        (found[1][0], 7),
    ]
    struct.pack_into(">h", data, 21, 0x10)  # attributes under the CRC: not checked here
    assert len(encoded_batches(data)) == 2
    struct.pack_into(">i", data, 8, 0)  # a length that would never advance: an error
    with pytest.raises(CorruptRecordError):
        encoded_batches(data)


WRITER = textwrap.dedent(
    """
    import sys
    from seglog.storage import open_log
    log = open_log(sys.argv[1], create=True, segment_bytes=1 << 20)
    while True:
        start = log.next_offset()
        values = [b"v%09d" % (start + i) for i in range(500)]
        end = log.publish_values(values, [b"k%07d" % i for i in range(500)])
        print(start, end, flush=True)
    """
)


def test_kill_9_after_publish_values_keeps_what_was_acknowledged(tmp_path):
    """A writer publishing same-size records (the trusted encode + append path) is
    killed after a number of acknowledgements read from its output (no sleeps); the
    reopened log holds every acknowledged record, CRC-valid, and a torn tail appended to
    the active segment is cut by recovery."""
    path = tmp_path / "p"
    acked_end = 0
    for cycle in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        for _ in range(10 + 7 * cycle):  # segments roll at 1 MiB: ~35 publishes each
            start, end = map(int, proc.stdout.readline().split())
            assert start == acked_end
            acked_end = end
        os.kill(proc.pid, signal.SIGKILL)
        for line in proc.stdout.read().splitlines():  # acknowledged before it died
            if len(parts := line.split()) == 2:
                acked_end = int(parts[1])
        proc.wait()
        proc.stdout.close()
        active = max(path.glob("*.log"))
        with open(active, "ab") as f:  # a half-written batch at the tail
            f.write(bytes(_batch())[:700])
        with open_log(path) as log:
            assert log.log_end_offset >= acked_end
            stored = b"".join(bytes(b) for b in log.batches(0))
            check_batch_crcs(stored)
            cols = log.consume_columns(0, log.log_end_offset)
            want = [b"v%09d" % i for i in range(log.log_end_offset)]
            assert cols.values() == want
            assert np.array_equal(cols.offsets, np.arange(log.log_end_offset))
            acked_end = log.log_end_offset
    assert acked_end >= 500 * (10 + 17 + 24 + 31)


def test_reused_encode_buffers_never_leak_earlier_records(tmp_path):
    """publish hands its batch buffer back to the encoder's pool (``give_back``) and the
    next batch of the same shape is built in it: every stored batch is still exactly
    what a fresh encode gives, whichever thread published it."""
    shapes = [(1000, 8, 100), (1000, 8, 100), (999, 8, 100), (1000, 3, 100), (1000, 8, 100)]
    rounds = [
        (
            [bytes([(r * 7 + i) % 256]) * vlen for i in range(n)],
            [bytes([(r + i) % 256]) * klen for i in range(n)],
        )
        for r, (n, klen, vlen) in enumerate(shapes)
    ]
    with open_log(tmp_path / "p", create=True) as log:
        for values, keys in rounds:
            log.publish_values(values, keys, timestamp_ms=1_700_000_000_000)
        for values, keys in rounds[:2]:  # Message objects: the same pool
            log.publish(
                [
                    Message(timestamp=1_700_000_000_000, key=k, value=v)
                    for k, v in zip(keys, values, strict=True)
                ]
            )
        errors: list[BaseException] = []
        barrier = threading.Barrier(3)

        def worker(values: list[bytes], keys: list[bytes]) -> None:
            try:
                barrier.wait()
                for _ in range(20):
                    log.publish_values(values, keys, timestamp_ms=1_700_000_000_000)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=rounds[i]) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        stored = [bytes(b) for b in log.batches(0)]
    expected = [*rounds, *rounds[:2]]
    for batch, (values, keys) in zip(stored, expected, strict=False):
        fresh = bytearray(encode_records(values, keys, 1_700_000_000_000, None, 1 << 20))
        fresh[:8] = batch[:8]  # base offset
        fresh[12:16] = batch[12:16]  # partition leader epoch
        assert batch == bytes(fresh)
    check_batch_crcs(b"".join(stored))
    by_first_value: dict[bytes, int] = {}
    for batch in stored[len(expected) :]:
        cols = decode_columns(batch)
        values = cols.values()
        assert (values, cols.keys()) in [(v, k) for v, k in rounds[:3]]
        by_first_value[values[0]] = by_first_value.get(values[0], 0) + 1
    assert sorted(by_first_value.values()) == [20, 20, 20]
