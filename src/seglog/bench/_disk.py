"""The raw disk reference: what appending 1 MiB buffers with fdatasync costs on this disk.

This is the ceiling for any log that makes every acknowledged append durable: one
``os.write`` of a 1 MiB buffer to the end of a growing file, then ``os.fdatasync``, repeated
(no Python buffering, no record format, no network). It varies with the machine and how
busy it is, which is why it is re-measured in every run, in the bench data directory, so
it shares the disk with the broker's segments.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["raw_append_rate"]

MIB = 1 << 20


def raw_append_rate(directory: Path, total_bytes: int, chunk_bytes: int = MIB) -> float:
    """Append ``total_bytes`` (rounded up to whole chunks) to a new file in ``directory``
    with one ``os.write`` + ``os.fdatasync`` per ``chunk_bytes`` buffer; return MB/s
    (10^6 bytes per second). The file is removed afterwards. OSError from the disk."""
    chunks = max(1, -(-total_bytes // chunk_bytes))
    buf = os.urandom(chunk_bytes)
    path = directory / f"raw-append-{os.getpid()}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(chunks):
            view = memoryview(buf)
            while view:
                view = view[os.write(fd, view) :]
            os.fdatasync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return chunks * chunk_bytes / elapsed / 1e6
