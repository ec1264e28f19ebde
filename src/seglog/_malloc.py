"""glibc malloc settings for the broker process (and for a Spark Python worker reading a
topic range, ``spark/_reader.py``: its 8 MiB chunks and their Arrow columns faulted in the
same way).

A fetch allocates buffers of about ``max.partition.fetch.bytes`` (1 MiB by default) per
partition: the ``os.pread`` result and, over TLS, the encrypted copy in the SSL memory BIO
and the ``bytes`` the event loop reads out of it, all alive until the response is written.
Under glibc's defaults (a dynamic mmap threshold that settles at the largest block freed,
and a trim threshold of twice that) the heap top then holds more free memory than the trim
threshold after most responses, so glibc hands it back to the kernel and the next
response faults it in again, zero-filled: ~480 page faults per 3 x 1 MiB allocated and
freed. Whether a broker falls into that depends on its heap's history: most fresh
brokers serving fetches first did (~470 page faults per MB sent; broker CPU per 300 MB
fetched in 1 MiB fetches 0.42-0.52 s over TLS and 0.33-0.39 s plaintext, against
0.18-0.29 s and 0.08-0.15 s with these settings), a broker that took produce traffic first
mostly did not (benchmarks/security_bench.py: ~0-2 faults per MB either way).

:func:`tune_malloc` fixes both thresholds: blocks up to ``MMAP_THRESHOLD`` come from the
heap, and up to ``TRIM_THRESHOLD`` of free heap stays mapped (the resident-memory cost,
at most). ``SEGLOG_MALLOC_TUNING=0`` leaves glibc's defaults.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_malloc"]

MMAP_THRESHOLD = 4 * 1024 * 1024
"""Bytes: larger blocks are mmapped (and unmapped when freed)."""
TRIM_THRESHOLD = 16 * 1024 * 1024
"""Bytes of free memory at the heap top kept before glibc returns it to the kernel."""

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, <malloc.h>
_M_MMAP_THRESHOLD = -3


def tune_malloc(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Set glibc's mmap and trim thresholds (bytes) for this process (see the module
    docstring). True when applied; False on another C library, without a loadable libc,
    or when ``SEGLOG_MALLOC_TUNING`` is "0". Never raises."""
    if os.environ.get("SEGLOG_MALLOC_TUNING", "") == "0":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # the mmap threshold first: setting either one turns glibc's dynamic adjustment off
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    )
