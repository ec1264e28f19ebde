"""The local cache of remote segments: downloaded, checked, opened, bounded, LRU on disk.

A remote segment is read through a real read-only :class:`Segment` opened on a copy of
its objects under ``<cache dir>/<partition key>/<upload id>/`` (the upload id makes the
directory name unique to that content, so a copy left by an earlier process is reused
after the same checks). Before a segment is served:

- every object's CRC-32C must equal the manifest's (a whole-object check), and
- the ``.log`` is scanned batch by batch with CRC-32C verification (Kafka's record batch
  v2 checks: length, magic, CRC-32C, contiguous offsets) and must end exactly at the
  manifest's size and end offset.

Any mismatch raises :class:`RemoteCorruptionError`; the copy is deleted and nothing from
it is served. The cache holds at most ``cache_bytes`` bytes of segment files (the segment
in use may exceed it alone); the least recently used segments are evicted: their files
are removed at once, their open file kept for ``RETIRE_DELAY_S`` for readers that hold it.
When the cache's disk is full (ENOSPC), every idle entry is evicted and the download is
retried, then retried in a RAM directory (``/dev/shm``) so reads go on with a full disk.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import pathlib
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable

import crc32c

from seglog.errors import CorruptRecordError
from seglog.storage.fileio import files
from seglog.storage.remote.manifest import RemoteSegment
from seglog.storage.remote.store import RemoteStorageError
from seglog.storage.segment.segment import Segment

__all__ = ["CacheStats", "RemoteCache", "RemoteCorruptionError"]

RETIRE_DELAY_S = 10.0
_SUFFIX = {
    "log": files.LOG_SUFFIX,
    "index": files.INDEX_SUFFIX,
    "timeindex": files.TIMEINDEX_SUFFIX,
}
_RAM_DIR = "/dev/shm"


Fetch = Callable[[str, pathlib.Path], tuple[int, int]]
"""``fetch(key, path) -> (bytes, CRC-32C)``: stream an object into a new local file."""


class RemoteCorruptionError(CorruptRecordError, RemoteStorageError):
    """A remote object failed its CRC-32C (whole object or a record batch): never served."""


class CacheStats:
    """Counters of one cache (monotonic)."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.downloaded_bytes = 0
        self.corrupt = 0


class RemoteCache:
    """Remote segments opened from local copies, LRU-bounded by bytes. Thread-safe.
    One per cache directory per process: :meth:`shared`."""

    _shared: dict[str, RemoteCache] = {}  # noqa: RUF012 - the process-wide registry
    _shared_guard = threading.Lock()

    def __init__(self, directory: pathlib.Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[str, tuple[Segment, int, pathlib.Path]] = (
            collections.OrderedDict()
        )
        self._loading: dict[str, threading.Lock] = {}
        self._retired: list[tuple[float, Segment]] = []
        self.bytes = 0

    @classmethod
    def shared(cls, directory: str | None, max_bytes: int) -> RemoteCache:
        """The process's cache for ``directory`` (None: the temporary directory's
        ``seglog-remote-cache``); the last ``max_bytes`` given wins."""
        path = pathlib.Path(directory or os.path.join(tempfile.gettempdir(), "seglog-remote-cache"))
        with cls._shared_guard:
            cache = cls._shared.get(str(path))
            if cache is None:
                cache = cls._shared[str(path)] = cls(path, max_bytes)
            cache.max_bytes = max_bytes
            return cache

    def segment(self, partition: str, entry: RemoteSegment, fetch: Fetch, interval: int) -> Segment:
        """The open cached Segment of ``entry`` (downloaded through ``fetch(key, path)`` on
        a miss).
        Raises RemoteCorruptionError, RemoteStorageError, OSError."""
        key = f"{partition}/{entry.upload_id}"
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.stats.hits += 1
                return hit[0]
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:  # one download per segment at a time
            with self._lock:
                hit = self._entries.get(key)
                if hit is not None:
                    self._entries.move_to_end(key)
                    self.stats.hits += 1
                    return hit[0]
                self.stats.misses += 1
            seg, where = self._load(partition, entry, fetch, interval)
            with self._lock:
                self._entries[key] = (seg, entry.total_bytes, where)
                self.bytes += entry.total_bytes
                self._loading.pop(key, None)
                self._evict(keep=key)
            return seg

    def _load(
        self, partition: str, entry: RemoteSegment, fetch: Fetch, interval: int
    ) -> tuple[Segment, pathlib.Path]:
        for attempt in range(3):
            root = self.directory if attempt < 2 else pathlib.Path(_RAM_DIR) / "seglog-remote-cache"
            where = root / partition / entry.upload_id
            try:
                if not (where / f"{entry.base_offset:020d}.log").exists():
                    self._download(partition, entry, fetch, where)
                return self._open(where, entry, interval), where
            except OSError as e:
                shutil.rmtree(where, ignore_errors=True)
                if e.errno != errno.ENOSPC or attempt == 2 or not os.path.isdir(_RAM_DIR):
                    raise
                if attempt == 0:
                    with self._lock:
                        self._evict(keep=None, target=0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _download(
        self, partition: str, entry: RemoteSegment, fetch: Fetch, where: pathlib.Path
    ) -> None:
        """Stream the segment's objects into a temporary directory, check each one's size
        and CRC-32C against the manifest, then rename the directory to ``where``."""
        tmp = where.with_name(f".{where.name}.{uuid.uuid4().hex[:8]}")
        tmp.mkdir(parents=True, exist_ok=True)
        try:
            blobs: dict[str, pathlib.Path] = {}  # object key -> where it was downloaded
            for kind in ("log", "index", "timeindex"):
                obj = entry.objects.get(kind)
                if obj is None:
                    continue
                path = tmp / f"{entry.base_offset:020d}{_SUFFIX[kind]}"
                if kind == "log":
                    size, crc = fetch(obj.key, path)  # the .log: streamed to its file
                    blobs[obj.key] = path
                else:  # an index inside the segment's .indexes object
                    whole = blobs.get(obj.key)
                    if whole is None:
                        whole = blobs[obj.key] = tmp / ".indexes"
                        fetch(obj.key, whole)
                    with open(whole, "rb") as f:
                        f.seek(obj.offset)
                        data = f.read(obj.size)
                    path.write_bytes(data)
                    size, crc = len(data), crc32c.crc32c(data)
                self.stats.downloaded_bytes += size
                if size != obj.size or crc != obj.crc32c:
                    self.stats.corrupt += 1
                    raise RemoteCorruptionError(
                        f"remote object {obj.key}: CRC-32C/size mismatch with the manifest "
                        f"({kind} of segment {entry.base_offset} of {partition}); not served"
                    )
            with contextlib.suppress(FileNotFoundError):
                (tmp / ".indexes").unlink()
            tmp.rename(where)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if not where.is_dir():
                raise
            # another thread or process placed the same segment meanwhile: use theirs

    def _open(self, where: pathlib.Path, entry: RemoteSegment, interval: int) -> Segment:
        seg = Segment(where, entry.base_offset, read_only=True)
        try:
            scanned = seg.scan(interval, verify_crc=True, max_bytes=1 << 31)
        except Exception:
            seg.close()
            raise
        if scanned.valid_size != entry.size or scanned.next_offset != entry.end_offset:
            seg.close()
            shutil.rmtree(where, ignore_errors=True)
            self.stats.corrupt += 1
            raise RemoteCorruptionError(
                f"remote segment {entry.base_offset} ({where.name}): "
                f"{scanned.reason or 'wrong end'}"
                f" (valid {scanned.valid_size} of {entry.size} bytes, end {scanned.next_offset}"
                f" != {entry.end_offset}); not served"
            )
        return seg

    def _evict(self, *, keep: str | None, target: int | None = None) -> None:
        """Evict LRU entries (caller holds ``_lock``) down to ``target`` bytes (default
        ``max_bytes``), never ``keep``; close retired files past their delay."""
        limit = self.max_bytes if target is None else target
        for key in list(self._entries):
            if self.bytes <= limit:
                break
            if key == keep:
                continue
            seg, size, where = self._entries.pop(key)
            self.bytes -= size
            self.stats.evictions += 1
            shutil.rmtree(where, ignore_errors=True)
            self._retired.append((time.monotonic(), seg))
        now = time.monotonic()
        old = [s for t, s in self._retired if now - t >= RETIRE_DELAY_S]
        self._retired = [(t, s) for t, s in self._retired if now - t < RETIRE_DELAY_S]
        for seg in old:
            seg.close()

    def holds(self, partition: str, upload_id: str) -> bool:
        """Whether the segment is cached (opened and checked)."""
        with self._lock:
            return f"{partition}/{upload_id}" in self._entries

    def drop(self, partition: str, upload_id: str) -> None:
        """Forget one segment (deleted from the tier)."""
        with self._lock:
            found = self._entries.pop(f"{partition}/{upload_id}", None)
            if found is not None:
                self.bytes -= found[1]
                shutil.rmtree(found[2], ignore_errors=True)
                self._retired.append((time.monotonic(), found[0]))

    def drop_partition(self, partition: str) -> int:
        """Forget every cached segment of ``partition`` (its topic was deleted); returns
        how many."""
        with self._lock:
            keys = [k for k in self._entries if k.startswith(f"{partition}/")]
        for key in keys:
            self.drop(partition, key.removeprefix(f"{partition}/"))
        return len(keys)

    def clear(self) -> None:
        """Evict everything (tests, benchmarks: a cold cache)."""
        with self._lock:
            self._evict(keep=None, target=0)
