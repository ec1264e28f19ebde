"""``python -m seglog.bench.fsync_probe``: what one fdatasync costs next to other work.

Issue 6 asks ``publish`` with an fsync per call to reach 0.8x of the same record batches
written and fdatasync'ed by hand. The storage benchmark's rows say how far each side is;
this probe says where the difference goes, per call, in microseconds (medians over
interleaved rounds, so a noisy machine shifts every variant alike):

- ``reference``: ``os.pwrite`` of one encoded batch (1,000 records of 100 B, 8 B keys,
  118 KB, record batch v2) + ``os.fdatasync``, the storage benchmark's reference;
- ``encode``: the same, but each batch encoded in the loop (``encode_records``), as any
  log built on that encoder must (the benchmark's "no log" ceiling row);
- ``encode + walk``: the same plus ``--walk`` small Python objects visited (a lock taken
  for each: bookkeeping-like work) between the write and the fdatasync;
- ``encode + spin``: the same plus a busy wait as long as that walk took, touching no
  memory (time alone, not footprint);
- ``publish_values``: ``Log.publish_values`` of the same records, fsync per call (the
  default policy). Its fdatasync is timed by wrapping ``os.fdatasync`` for the run
  (restored after): the log runs it in the calling thread when no other writer waits.

Columns: the whole call, the fdatasync inside it (median and mean of the calls), and the
rest (CPU: encoding, bookkeeping, the page-cache copy). Read it as: how much of a
variant's extra time is its own CPU work, and how much the fdatasync after that work
slows down. Each variant writes a fresh file (or log) in a temporary directory under
``--dir`` and removes it before the next variant starts: with 11 rounds of files kept
instead, ``pwrite`` of 118 KB went from ~45 to ~290 us a call here, page cache taken from
memory the VM had not touched lately (it hands free memory back to its host:
virtio-balloon free page reporting, the likely cause), which would charge whichever
variant ran last for fresh pages the others did not need.

    python -m seglog.bench.fsync_probe                  # 11 rounds x 300 calls (~10 s)
    python -m seglog.bench.fsync_probe --rounds 5 --calls 100
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console
from rich.table import Table

from seglog.storage import encode_records, open_log

if TYPE_CHECKING:
    from _typeshed import HasFileno

__all__ = ["ProbeRow", "fsync_probe", "main"]

BATCH = 1000
VALUE_BYTES = 100


@dataclass(frozen=True)
class ProbeRow:
    """One variant: medians over rounds of per-call microseconds."""

    variant: str
    call_us: float
    """Wall time of one call (write + fdatasync + the variant's own work)."""
    fdatasync_p50_us: float
    """Median fdatasync of a round's calls (its median over rounds)."""
    fdatasync_mean_us: float
    """Mean fdatasync of a round's calls (its median over rounds)."""

    @property
    def rest_us(self) -> float:
        """The call without its fdatasync: CPU work and the page-cache copy."""
        return self.call_us - self.fdatasync_mean_us


class _Item:
    __slots__ = ("lock", "value")

    def __init__(self, value: int) -> None:
        self.value = value
        self.lock = threading.Lock()


def _walk(items: list[_Item]) -> int:
    total = 0
    for item in items:
        with item.lock:
            total += item.value
    return total


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


@contextmanager
def _timed_fdatasync(times: list[float]) -> Iterator[None]:
    """``os.fdatasync`` records each call's seconds in ``times`` inside the block."""
    real = os.fdatasync

    def timed(fd: int | HasFileno) -> None:
        start = time.perf_counter()
        real(fd)
        times.append(time.perf_counter() - start)

    os.fdatasync = timed
    try:
        yield
    finally:
        os.fdatasync = real


_Loop = Callable[[Path, int, list[float]], float]


def _loops(walk_objects: int) -> dict[str, _Loop]:
    values = [os.urandom(VALUE_BYTES)] * BATCH
    keys = [b"key-%04d" % i for i in range(BATCH)]
    cap = 1 << 30
    batch = bytes(encode_records(values, keys, np.zeros(BATCH, np.int64), None, cap))
    items = [_Item(i) for i in range(walk_objects)]
    start = time.perf_counter()
    for _ in range(20):
        _walk(items)
    walk_s = (time.perf_counter() - start) / 20

    def file_loop(work: Callable[[], object] | None, encode: bool) -> _Loop:
        def run(path: Path, calls: int, syncs: list[float]) -> float:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                pos, start = 0, time.perf_counter()
                for _ in range(calls):
                    data: bytes | bytearray = batch
                    if encode:
                        ts = time.time_ns() // 1_000_000
                        data = encode_records(values, keys, ts, None, cap, mutable=True)
                    pos += os.pwrite(fd, data, pos)
                    if work is not None:
                        work()
                    t = time.perf_counter()
                    os.fdatasync(fd)
                    syncs.append(time.perf_counter() - t)
                return time.perf_counter() - start
            finally:
                os.close(fd)

        return run

    def publish_loop(path: Path, calls: int, syncs: list[float]) -> float:
        with open_log(path, create=True) as log:
            log.publish_values(values, keys)  # the log's files exist and are durable
            with _timed_fdatasync(syncs):
                start = time.perf_counter()
                for _ in range(calls):
                    log.publish_values(values, keys)
                return time.perf_counter() - start

    return {
        "reference (pwrite + fdatasync)": file_loop(None, False),
        "encode, no log": file_loop(None, True),
        f"encode + walk of {walk_objects} objects": file_loop(lambda: _walk(items), True),
        f"encode + spin of {walk_s * 1e6:.0f} us": file_loop(lambda: _spin(walk_s), True),
        "publish_values": publish_loop,
    }


def fsync_probe(
    directory: Path,
    *,
    rounds: int = 11,
    calls: int = 300,
    walk_objects: int = 300,
    progress: Callable[[str], None] | None = None,
) -> list[ProbeRow]:
    """Run every variant ``rounds`` times (order alternating each round) for ``calls``
    calls each, in a temporary directory under ``directory`` (removed after); return one
    row per variant, in microseconds per call. ValueError if rounds or calls < 1."""
    if rounds < 1 or calls < 1:
        raise ValueError("rounds and calls must be >= 1")
    loops = _loops(walk_objects)
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in loops}
    with tempfile.TemporaryDirectory(dir=directory, prefix="fsync-probe-") as tmp:
        names = list(loops)
        for r in range(rounds):
            if progress is not None:
                progress(f"round {r + 1}/{rounds}")
            for i, name in enumerate(names if r % 2 == 0 else names[::-1]):
                path = Path(tmp) / f"r{r}-v{i}"
                syncs: list[float] = []
                elapsed = loops[name](path, calls, syncs)
                _remove(path)  # its page cache freed before the next variant (see above)
                seen[name].append(
                    (elapsed / calls, statistics.median(syncs), statistics.fmean(syncs))
                )
    us = 1e6
    return [
        ProbeRow(
            name,
            statistics.median(s[0] for s in samples) * us,
            statistics.median(s[1] for s in samples) * us,
            statistics.median(s[2] for s in samples) * us,
        )
        for name, samples in seen.items()
    ]


def table(rows: list[ProbeRow]) -> Table:
    """A rich table of ``rows`` (microseconds per call; ratio to the first row)."""
    t = Table(title="one fdatasync per call, us a call (medians of interleaved rounds)")
    for head in ("variant", "call", "fdatasync p50", "mean", "rest", "ratio"):
        t.add_column(head)
    ref = rows[0].call_us
    for r in rows:
        t.add_row(
            r.variant,
            f"{r.call_us:.0f}",
            f"{r.fdatasync_p50_us:.0f}",
            f"{r.fdatasync_mean_us:.0f}",
            f"{r.rest_us:.0f}",
            f"{ref / r.call_us:.2f}x",
        )
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m seglog.bench.fsync_probe", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds (medians)")
    ap.add_argument("--calls", type=int, default=300, help="write + fdatasync calls per run")
    ap.add_argument("--walk", type=int, default=300, help="objects the walk variant visits")
    ap.add_argument("--dir", type=Path, default=Path("."), help="where to write (temp dir)")
    args = ap.parse_args(argv)
    console = Console(stderr=True)
    with console.status("fsync probe") as status:
        rows = fsync_probe(
            args.dir,
            rounds=args.rounds,
            calls=args.calls,
            walk_objects=args.walk,
            progress=lambda text: status.update(f"fsync probe: {text}"),
        )
    Console().print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
