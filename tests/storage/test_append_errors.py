"""Bad batches are refused with the right error and nothing stored changes."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap

import crc32c
import pytest

from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    SeglogError,
    StorageError,
)
from seglog.storage import Log, LogConfig

from ._batches import make_batch


def _with(batch: bytes, pos: int, fmt: str, value: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(fmt, b, pos, value)
    return bytes(b)


GOOD = make_batch(3)
CASES = [
    ("bad crc", _with(GOOD, 17, ">I", 12345), CorruptRecordError),
    ("flipped record byte", GOOD[:70] + bytes([GOOD[70] ^ 1]) + GOOD[71:], CorruptRecordError),
    ("magic 1", _with(GOOD, 16, ">b", 1), InvalidRecordError),
    ("magic 0", _with(GOOD, 16, ">b", 0), InvalidRecordError),
    ("magic 7", _with(GOOD, 16, ">b", 7), CorruptRecordError),
    ("truncated", GOOD[:-1], CorruptRecordError),
    ("header only part", GOOD[:30], CorruptRecordError),
    ("length too small", _with(GOOD, 8, ">i", 10), CorruptRecordError),
    ("length negative", _with(GOOD, 8, ">i", -5), CorruptRecordError),
    ("length past end", _with(GOOD, 8, ">i", len(GOOD)), CorruptRecordError),
    ("empty input", b"", InvalidRecordError),
    ("count mismatch", _with(GOOD, 57, ">i", 2), CorruptRecordError),
    ("second batch bad", GOOD + _with(GOOD, 17, ">I", 1), CorruptRecordError),
    ("trailing junk", GOOD + b"\x00" * 10, CorruptRecordError),
]


@pytest.mark.parametrize(("name", "data", "error"), CASES, ids=[c[0] for c in CASES])
def test_bad_batch_refused_nothing_changes(tmp_path, name, data, error):
    with Log.open(tmp_path / "p", create=True) as log:
        log.append(make_batch(2))
        log.sync()
        seg = tmp_path / "p" / f"{0:020d}.log"
        before = seg.read_bytes()
        with pytest.raises(error):
            log.append(data)
        assert seg.read_bytes() == before
        assert log.log_end_offset == 2
        assert log.append(make_batch(1)).base_offset == 2
    assert issubclass(error, StorageError)
    assert issubclass(error, SeglogError)
    del name


def test_record_too_large(tmp_path):
    big = make_batch(5, value_size=400)
    with Log.open(tmp_path / "p", LogConfig(max_message_bytes=1000), create=True) as log:
        with pytest.raises(RecordTooLargeError):
            log.append(make_batch(1) + big)
        assert log.log_end_offset == 0
        assert os.path.getsize(tmp_path / "p" / f"{0:020d}.log") == 0


def test_control_batch_from_client_refused(tmp_path):
    b = bytearray(make_batch(1))
    struct.pack_into(">h", b, 21, 0x20)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    with Log.open(tmp_path / "p", create=True) as log, pytest.raises(InvalidRecordError):
        log.append(bytes(b))


def test_write_error_cuts_back_and_raises(tmp_path):
    """A real write failure (RLIMIT_FSIZE → EFBIG) midway leaves no partial batch."""
    script = textwrap.dedent(
        f"""
        import os, resource, signal, sys
        sys.path.insert(0, {str(os.path.dirname(os.path.dirname(__file__)))!r})
        from storage._batches import make_batch
        from seglog.errors import StorageError
        from seglog.storage import Log
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        log = Log.open({str(tmp_path / "p")!r}, create=True)
        log.append(make_batch(2))
        log.sync()
        seg = {str(tmp_path / "p" / f"{0:020d}.log")!r}
        size = os.path.getsize(seg)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 50, resource.RLIM_INFINITY))
        try:
            log.append(make_batch(10, value_size=100))
        except StorageError as e:
            print("error", type(e).__name__, e)
        print("size", os.path.getsize(seg) == size, log.log_end_offset)
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        print("next", log.append(make_batch(1)).base_offset)
        log.close()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "error StorageError" in out
    assert "size True 2" in out
    assert "next 2" in out
    with Log.open(tmp_path / "p") as log:
        assert log.log_end_offset == 3
