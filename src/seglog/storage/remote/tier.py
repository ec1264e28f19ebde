"""RemoteTier: one partition's view of the object store (Kafka's RemoteLogManager, for
one partition): the committed manifest, uploads (copy, then commit), deletions (commit,
then delete), orphan cleanup, and reads of remote segments through the local cache.

Thread-safety: one maintenance caller at a time uploads or deletes (the log's
maintenance lock, ``retention/tiering.py``); readers use ``manifest`` (immutable,
replaced on commit) from any thread.

Object keys: ``<partition>/<base offset %020d>-<upload id>.log`` and ``.indexes`` (the
offset and time index, then the ``.txnindex`` and ``.snapshot`` when present, in one
object: one request), ``<partition>/manifest.json``.
``<partition>`` is the partition directory's name (``<topic>-<n>``), followed by
``-<topic id>`` when the directory has a ``partition.metadata`` (broker topics).
"""

from __future__ import annotations

import bisect
import logging
import os
import pathlib
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import crc32c

from seglog.errors import CorruptRecordError
from seglog.storage.index.txn_index import AbortedTxn, parse_entries
from seglog.storage.record.batch import HEADER_SIZE, parse_header
from seglog.storage.remote.cache import RemoteCache, RemoteCorruptionError
from seglog.storage.remote.manifest import (
    MANIFEST_KEY,
    Manifest,
    RemoteObject,
    RemoteSegment,
)
from seglog.storage.remote.store import (
    ObjectStore,
    RemoteObjectNotFoundError,
    RemoteStorage,
    RemoteStorageError,
)
from seglog.storage.segment import swap
from seglog.storage.segment.segment import Segment

__all__ = [
    "BATCH_SEGMENTS",
    "UPLOADED_KINDS",
    "RemoteSlice",
    "RemoteTier",
    "TierCounters",
    "partition_key",
]

_logger = logging.getLogger(__name__)

UPLOADED_KINDS = ("log", "index", "timeindex", "txnindex", "snapshot")
"""File kinds uploaded per segment (``<base>.<kind>`` in the partition directory); the
last two only when present (Kafka's aborted-transaction index, producer snapshot)."""

UPLOAD_THREADS = 8
"""Objects put concurrently by one upload pass."""
STREAM_ABOVE = 8 << 20
"""Files larger than this are streamed (multipart) instead of read whole."""
BATCH_SEGMENTS = 16
"""Segments uploaded per manifest commit at most."""
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 30.0


class RemoteSlice(NamedTuple):
    """Whole record batches of a cached remote segment, for ``os.preadv`` / ``sendfile``
    (the fields of ``Log.read_slice``'s FileSlice)."""

    fd: int
    position: int
    size: int


def partition_key(directory: pathlib.Path) -> str:
    """The key prefix of a partition directory's objects: its name, plus its topic id when
    it has one (``partition.metadata``, Kafka's): a topic deleted and created again under
    the same name never meets the old topic's objects."""
    try:
        text = (directory / "partition.metadata").read_text()
    except OSError:
        return directory.name
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "topic_id" and value.strip():
            return f"{directory.name}-{value.strip()}"
    return directory.name


def _load_manifest(
    store: ObjectStore, partition: str, settings: RemoteStorage, local: Manifest | None
) -> tuple[Manifest, bool]:
    """(the store's manifest, True); a missing one is empty; (the local copy or empty,
    False) when the store cannot be read."""
    empty = Manifest(partition, settings.url, settings.endpoint_url)
    try:
        return Manifest.from_json(store.get(f"{partition}/{MANIFEST_KEY}")), True
    except RemoteObjectNotFoundError:
        return empty, True
    except (RemoteStorageError, ValueError) as e:
        _logger.warning(
            "remote manifest of %s unavailable (%s): using the local copy", partition, e
        )
        return local or empty, False


def _first_offset(e: AbortedTxn) -> int:
    return e.first_offset


class TierCounters:
    """Monotonic counters of one partition's tier (the broker's metrics read them)."""

    def __init__(self) -> None:
        self.uploaded_segments = 0
        self.uploaded_bytes = 0
        self.upload_failures = 0
        self.deleted_segments = 0
        self.orphans_deleted = 0


class RemoteTier:
    """The remote part of one partition log. Open with :meth:`open`."""

    def __init__(
        self,
        directory: pathlib.Path,
        settings: RemoteStorage,
        manifest: Manifest,
        store: ObjectStore,
        *,
        reachable: bool,
    ) -> None:
        self.directory = directory
        self.settings = settings
        self.manifest = manifest
        """The committed manifest (replaced, never mutated)."""
        self.store = store
        self.cache = RemoteCache.shared(settings.cache_dir, settings.cache_bytes)
        self.counters = TierCounters()
        self.reachable = reachable
        """False after the last store operation failed."""
        self.last_error: str | None = None
        self.backoff_s = 0.0
        self.next_attempt = 0.0
        """``time.monotonic()`` before which uploads are not retried (exponential backoff)."""
        self.orphans_checked = False
        self._aborted: dict[str, tuple[AbortedTxn, ...]] = {}
        """Upload id -> the entries of that remote segment's ``.txnindex`` (read once;
        entries are immutable with their upload id)."""

    @property
    def partition(self) -> str:
        return self.manifest.partition

    @classmethod
    def open(
        cls, directory: pathlib.Path, settings: RemoteStorage | None, *, writer: bool
    ) -> RemoteTier | None:
        """The tier of the partition log in ``directory``: with ``settings`` (tiering on),
        else from the directory's manifest copy (a log tiered earlier, e.g. read-only opens
        by Spark or ``seglog stat``); None when neither. The store's manifest wins over
        the local copy; an unreachable store falls back to the copy (uploads retried
        later). A writer deletes orphan objects (uploads never committed) once the store
        answers."""
        local = Manifest.read_local(directory)
        if settings is None:
            if local is None:
                return None
            settings = RemoteStorage(local.url, local.endpoint_url)
        if local is not None and local.url != settings.url:
            local = None  # a different store: start afresh there
        store = ObjectStore.for_settings(settings)
        partition = local.partition if local is not None else partition_key(directory)
        manifest, reachable = _load_manifest(store, partition, settings, local)
        tier = cls(directory, settings, manifest, store, reachable=reachable)
        if writer and reachable:
            try:
                tier.delete_orphans()
            except RemoteStorageError as e:  # tried again by the next upload pass
                tier.failed(e)
        return tier

    @classmethod
    def open_remote(
        cls, settings: RemoteStorage, partition: str, *, directory: pathlib.Path | None = None
    ) -> RemoteTier:
        """The tier of ``partition`` (its key prefix) from the store alone, for readers
        without the partition directory (Spark executors on other machines): its manifest
        is read from the store. RemoteStorageError when it cannot be."""
        store = ObjectStore.for_settings(settings)
        try:
            manifest = Manifest.from_json(store.get(f"{partition}/{MANIFEST_KEY}"))
        except ValueError as e:
            raise RemoteStorageError(f"{partition}/{MANIFEST_KEY}: {e}") from e
        return cls(directory or pathlib.Path(partition), settings, manifest, store, reachable=True)

    def reload(self) -> None:
        """Re-read the committed manifest (readers beside a writer in another process:
        the writer uploaded, and deleted local copies, since)."""
        local = Manifest.read_local(self.directory)
        if local is not None and local.partition != self.partition:
            local = None
        manifest, reachable = _load_manifest(self.store, self.partition, self.settings, local)
        if reachable or len(manifest.segments) >= len(self.manifest.segments):
            self.manifest = manifest

    # -- reads ------------------------------------------------------------------------------

    def read_slice(
        self, offset: int, max_bytes: int, upper: int, interval: int = 4096
    ) -> RemoteSlice | None:
        """Whole record batches from the remote batch holding ``offset``, up to
        ``max_bytes`` (at least one batch), base offsets below ``upper``; None when the
        tier has none there. Raises RemoteCorruptionError, RemoteStorageError."""
        found = self.locate(offset, upper, 1 << 62, interval)
        if found is None:
            return None
        seg, pos, size = found
        end = pos
        while size - end >= HEADER_SIZE:
            h = parse_header(os.pread(seg.fd, HEADER_SIZE, end))
            if h.base_offset >= upper or (end > pos and end + h.size - pos > max_bytes):
                break
            end += h.size
        return RemoteSlice(seg.fd, pos, end - pos) if end > pos else None

    def aborted_transactions(
        self, start: int, end: int, local_base: int = 1 << 62
    ) -> list[tuple[int, int]]:
        """(producer id, first offset) of :meth:`aborted_entries`, by first offset
        (Spark path mode's remote source: every remote segment of the manifest)."""
        return [
            (e.producer_id, e.first_offset) for e in self.aborted_entries(start, end, local_base)
        ]

    def aborted_entries(self, start: int, end: int, local_base: int = 1 << 62) -> list[AbortedTxn]:
        """Kafka's ``AbortedTxn`` entries recorded in the ``.txnindex`` of the remote
        segments below ``local_base`` from the one holding ``start`` on, whose marker is
        >= ``start`` and first offset < ``end``, by first offset (Kafka's
        RemoteLogManager remote transaction index lookup; it stops after a segment holding
        an entry whose last stable offset is >= ``end``). Each segment's entries are
        read once (a ranged GET of its part of the ``.indexes`` object, CRC-32C checked
        against the manifest) and kept in memory. Raises RemoteCorruptionError,
        RemoteStorageError."""
        entries = self.entries_below(local_base)
        i = max(0, bisect.bisect_right([s.base_offset for s in entries], start) - 1)
        found: list[AbortedTxn] = []
        for entry in entries[i:]:
            if entry.end_offset <= start or "txnindex" not in entry.objects:
                continue
            txns = self.txn_entries(entry)
            found += [e for e in txns if e.last_offset >= start and e.first_offset < end]
            if any(e.last_stable_offset >= end for e in txns):
                break  # every transaction starting below end had ended there (Kafka's rule)
        found.sort(key=_first_offset)
        return found

    def txn_entries(self, entry: RemoteSegment) -> tuple[AbortedTxn, ...]:
        """The parsed ``.txnindex`` of remote segment ``entry`` (none without one), read
        from the store on first use, then from memory. Raises RemoteCorruptionError
        (size, CRC-32C or entry check failed: nothing kept), RemoteStorageError."""
        known = self._aborted.get(entry.upload_id)
        if known is not None:
            return known
        obj = entry.objects.get("txnindex")
        data = b""
        if obj is not None and obj.size:
            data = self.store.get_range(obj.key, obj.offset, obj.offset + obj.size)
        if obj is not None and (len(data) != obj.size or crc32c.crc32c(data) != obj.crc32c):
            self.cache.stats.corrupt += 1
            raise RemoteCorruptionError(
                f"remote object {obj.key}: CRC-32C/size mismatch with the manifest "
                f"(txnindex of segment {entry.base_offset} of {self.partition}); not served"
            )
        try:
            parsed = tuple(parse_entries(data))
        except CorruptRecordError as e:
            raise RemoteCorruptionError(
                f"txnindex of remote segment {entry.base_offset} of {self.partition}: {e}"
            ) from e
        self._aborted[entry.upload_id] = parsed
        return parsed

    def open_segment(self, entry: RemoteSegment, interval: int) -> Segment:
        """The cached, checked Segment of ``entry`` (RemoteCorruptionError, RemoteStorageError)."""
        return self.cache.segment(self.partition, entry, self.store.get_to_file, interval)

    def entry_for(self, offset: int, local_base: int) -> RemoteSegment | None:
        """The remote segment a read at ``offset`` starts in (below ``local_base``), None
        when the offset is not the tier's."""
        entries = self.entries_below(local_base)
        i = max(0, bisect.bisect_right([s.base_offset for s in entries], offset) - 1)
        for entry in entries[i:]:
            if entry.end_offset > offset:
                return entry
        return None

    def is_cached(self, offset: int, local_base: int) -> bool:
        """Whether a read at ``offset`` is served without a download (the local cache
        holds its remote segment, or the offset is not the tier's)."""
        entry = self.entry_for(offset, local_base)
        return entry is None or self.cache.holds(self.partition, entry.upload_id)

    def prefetch(self, offset: int, local_base: int, interval: int = 4096) -> None:
        """Download (and check) the remote segment a read at ``offset`` needs into the
        cache, in the calling thread: the broker runs it off its event loop before a
        Fetch reads (and its ``.txnindex`` entries). Raises RemoteCorruptionError,
        RemoteStorageError."""
        entry = self.entry_for(offset, local_base)
        if entry is not None:
            self.open_segment(entry, interval)
            self.txn_entries(entry)  # what a read_committed Fetch there looks up next

    def next_to_prefetch(self, offset: int, local_base: int) -> int | None:
        """Read-ahead: the base offset of the remote segment after the one holding
        ``offset`` when the cache lacks it (a sequential reader will need it next), else
        None."""
        entry = self.entry_for(offset, local_base)
        if entry is None:
            return None
        after = self.entry_for(entry.end_offset, local_base)
        if after is None or self.cache.holds(self.partition, after.upload_id):
            return None
        return after.base_offset

    def entries_below(self, local_base: int) -> tuple[RemoteSegment, ...]:
        """Remote segments holding offsets below ``local_base`` (the first local segment)."""
        segs = self.manifest.segments
        n = bisect.bisect_left([s.base_offset for s in segs], local_base)
        return segs[:n]

    def start_offset(self, local_start: int) -> int:
        """The log start offset counting the tier: the remote start when the tier holds
        offsets below ``local_start``, else ``local_start``."""
        start = self.manifest.start_offset
        if start is None or self.manifest.segments[0].base_offset >= local_start:
            return local_start
        return min(start, local_start)

    def locate(
        self, offset: int, upper: int, local_base: int, interval: int
    ) -> tuple[Segment, int, int] | None:
        """``(segment, position, size)`` of the remote batch holding ``offset`` (or the
        first after it) below ``local_base``; None when the tier has none (or it is at or
        past ``upper``)."""
        entries = self.entries_below(local_base)
        i = max(0, bisect.bisect_right([s.base_offset for s in entries], offset) - 1)
        for entry in entries[i:]:
            if entry.end_offset <= offset:
                continue
            seg = self.open_segment(entry, interval)
            found = seg.find(offset, seg.size)
            if found is not None:
                pos, h = found
                return (seg, pos, seg.size) if h.base_offset < upper else None
        return None

    def segments_for_time(
        self, timestamp_ms: int, local_base: int, interval: int
    ) -> Iterator[Segment]:
        """Remote Segments below ``local_base`` that may hold a record at or after
        ``timestamp_ms`` (max timestamp >= it), oldest first, opened lazily."""
        for entry in self.entries_below(local_base):
            if entry.max_timestamp >= timestamp_ms:
                yield self.open_segment(entry, interval)

    # -- writes (one maintenance caller at a time) --------------------------------------------

    def commit(self, manifest: Manifest) -> None:
        """Write ``manifest`` to the store (atomic PUT: the commit point), then the local
        copy. RemoteStorageError leaves the previous manifest committed."""
        self.store.put(f"{manifest.partition}/{MANIFEST_KEY}", manifest.to_json())
        self.manifest = manifest
        manifest.write_local(self.directory)

    def upload(
        self, base_offset: int, end_offset: int, size: int, max_timestamp: int
    ) -> RemoteSegment:
        """One segment's :meth:`upload_many`."""
        return self.upload_many([(base_offset, end_offset, size, max_timestamp)])[0]

    def upload_many(self, specs: list[tuple[int, int, int, int]]) -> list[RemoteSegment]:
        """Copy segments ``(base offset, end offset, .log size, max timestamp)`` of the
        partition directory (each ``.log`` up to its size, its indexes, and a
        ``.txnindex`` / ``.snapshot`` when present) under fresh keys, every object put
        concurrently (``UPLOAD_THREADS``; files above 8 MiB streamed as multipart
        uploads), then commit one manifest naming them all. Raises RemoteStorageError
        (nothing committed: the objects put are orphans the next open removes), OSError."""
        ids = [uuid.uuid4().hex for _ in specs]
        objects: list[dict[str, RemoteObject]] = [{} for _ in specs]
        with ThreadPoolExecutor(UPLOAD_THREADS, thread_name_prefix="seglog-upload") as pool:
            stems = [f"{self.partition}/{b:020d}-{ids[i]}" for i, (b, *_) in enumerate(specs)]
            # the .log puts first (the big ones in flight together), then the .indexes
            futures = [
                (
                    i,
                    pool.submit(
                        self._put_log, f"{stems[i]}.log", self.directory / f"{b:020d}.log", n
                    ),
                )
                for i, (b, _end, n, _ts) in enumerate(specs)
            ]
            futures += [
                (i, pool.submit(self._put_indexes, f"{stems[i]}.indexes", b))
                for i, (b, *_) in enumerate(specs)
            ]
            for i, fut in futures:
                objects[i].update(fut.result())
                swap.step("remote-put")  # crash tests stop here: objects no manifest names
        now = time.time_ns() // 1_000_000
        entries = [
            RemoteSegment(
                base_offset=base,
                end_offset=end,
                size=size,
                max_timestamp=ts,
                upload_id=ids[i],
                uploaded_ms=now,
                objects=objects[i],
            )
            for i, (base, end, size, ts) in enumerate(specs)
        ]
        manifest = self.manifest
        for entry in entries:
            manifest = manifest.with_segment(entry)
        self.commit(manifest)
        swap.step("remote-commit")
        self.counters.uploaded_segments += len(entries)
        self.counters.uploaded_bytes += sum(e.total_bytes for e in entries)
        return entries

    def _put_log(self, key: str, path: pathlib.Path, limit: int) -> dict[str, RemoteObject]:
        """Put the first ``limit`` bytes of the ``.log`` at ``key`` (streamed as a
        multipart upload above ``STREAM_ABOVE``)."""
        with open(path, "rb") as f:
            total = os.fstat(f.fileno()).st_size
            size = min(limit, total)
            if size <= STREAM_ABOVE or size != total:
                data = f.read(size)
                self.store.put(key, data)
                return {"log": RemoteObject(key, size, crc32c.crc32c(data))}
            crc = 0
            while chunk := f.read(8 << 20):
                crc = crc32c.crc32c(chunk, crc)
            f.seek(0)
            self.store.put_stream(key, f)
            return {"log": RemoteObject(key, size, crc)}

    def _put_indexes(self, key: str, base: int) -> dict[str, RemoteObject]:
        """Put the segment's index files as one object at ``key`` (offset index, time
        index, then ``.txnindex`` / ``.snapshot`` when present; a missing offset or time
        index is empty: rebuilt from the data on read)."""
        parts: dict[str, RemoteObject] = {}
        blob = bytearray()
        for kind in UPLOADED_KINDS[1:]:
            try:
                data = (self.directory / f"{base:020d}.{kind}").read_bytes()
            except FileNotFoundError:
                if kind in ("txnindex", "snapshot"):
                    continue
                data = b""
            parts[kind] = RemoteObject(key, len(data), crc32c.crc32c(data), len(blob))
            blob += data
        self.store.put(key, bytes(blob))
        return parts

    def delete_below(self, offset: int) -> list[RemoteSegment]:
        """Commit a manifest without the segments wholly below ``offset`` (remote log start
        moved there), then delete their objects. Returns the segments removed."""
        old = self.manifest
        gone = [s for s in old.segments if s.end_offset <= offset]
        if not gone and old.log_start_offset >= offset:
            return []
        self.commit(old.without_below(offset))
        swap.step("remote-commit")
        self.store.delete(sorted({o.key for s in gone for o in s.objects.values()}))
        for s in gone:
            self.cache.drop(self.partition, s.upload_id)
            self._aborted.pop(s.upload_id, None)
        self.counters.deleted_segments += len(gone)
        return gone

    def delete_orphans(self) -> int:
        """Delete the partition's objects no committed manifest names (interrupted uploads
        or deletions). Returns how many. RemoteStorageError when the store fails."""
        named = self.manifest.keys() | {f"{self.partition}/{MANIFEST_KEY}"}
        orphans = [k for k, _ in self.store.list_objects(f"{self.partition}/") if k not in named]
        self.store.delete(orphans)
        self.store.sweep_partial(f"{self.partition}/")
        self.counters.orphans_deleted += len(orphans)
        self.orphans_checked = True
        return len(orphans)

    def failed(self, error: BaseException) -> None:
        """Record a failed store operation: backoff doubles (0.2 s .. 30 s)."""
        self.reachable = False
        self.last_error = str(error)
        self.counters.upload_failures += 1
        self.backoff_s = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, self.backoff_s * 2))
        self.next_attempt = time.monotonic() + self.backoff_s

    def succeeded(self) -> None:
        self.reachable = True
        self.last_error = None
        self.backoff_s = 0.0
        self.next_attempt = 0.0
