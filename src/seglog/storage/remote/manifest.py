"""The remote log manifest of one partition: which segments the tier holds, committed.

One JSON object per partition, at ``<partition key>/manifest.json`` in the store (the
authority) and as ``remote-log-manifest.json`` in the partition directory (a copy written
after the store's, read when the store is unreachable and by read-only opens to find the
store). Format (``format`` 1)::

    {"format": 1, "partition": "orders-0-<topic id>",  # the remote key prefix
     "url": "s3://bucket/prefix", "endpoint_url": null,
     "log_start_offset": 0,                          # remote log start (retention moves it)
     "segments": [                                   # oldest first, contiguous
       {"base_offset": 0, "end_offset": 1200,        # [base, end): end = next offset
        "size": 1048000,                             # bytes of the .log
        "max_timestamp": 1764190000000,              # ms, -1 if none
        "upload_id": "9f0c...",                      # makes every object key unique
        "uploaded_ms": 1764190000123,
        "state": "COPY_SEGMENT_FINISHED",            # Kafka's RemoteLogSegmentState
        "objects": {"log": {"key": "orders-0/00000000000000000000-9f0c.log",
                            "size": 1048000, "crc32c": 305419896, "offset": 0},
                    "index": {"key": ".../00000000000000000000-9f0c.indexes",
                              "size": 2048, "crc32c": 1, "offset": 0},
                    "timeindex": {... same key, "offset": 2048},
                    "txnindex": {...}, "snapshot": {...}}}]}   # the last two if present

Commit rule (copy, then commit): every object of a segment is put first, under keys no
other upload uses; the manifest naming them is written after (an atomic PUT): a crash in
between leaves objects no manifest names, which the next writer open deletes (orphans).
Deletion is the reverse: the manifest without the segment is committed, then its objects
are deleted. A reader only ever follows a committed manifest.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import asdict, dataclass, field, replace

from seglog.storage.fileio import files

__all__ = [
    "LOCAL_MANIFEST",
    "MANIFEST_KEY",
    "Manifest",
    "RemoteObject",
    "RemoteSegment",
]

LOCAL_MANIFEST = "remote-log-manifest.json"
"""The local copy's file name in the partition directory."""
MANIFEST_KEY = "manifest.json"
"""The manifest's object name under the partition's key prefix."""
FORMAT = 1
FINISHED = "COPY_SEGMENT_FINISHED"


@dataclass(frozen=True)
class RemoteObject:
    """One uploaded file of a segment."""

    key: str
    """Object key in the store."""
    size: int
    """Bytes."""
    crc32c: int
    """CRC-32C of these bytes (checked on every download)."""
    offset: int = 0
    """Where these bytes start in the object: a segment's indexes share one object
    (``.indexes``: offset index, time index, then the others present), one request."""


@dataclass(frozen=True)
class RemoteSegment:
    """A segment the tier holds (committed)."""

    base_offset: int
    end_offset: int
    """The offset after its last batch (the next segment's base, or more with gaps)."""
    size: int
    """Bytes of its ``.log``."""
    max_timestamp: int
    """Largest batch max timestamp (ms), -1 when none."""
    upload_id: str
    uploaded_ms: int
    objects: dict[str, RemoteObject]
    """By kind: ``log``, ``index``, ``timeindex``, and ``txnindex`` / ``snapshot`` when
    the partition directory had them."""
    state: str = FINISHED

    @property
    def total_bytes(self) -> int:
        """Bytes of every object of the segment."""
        return sum(o.size for o in self.objects.values())


@dataclass(frozen=True)
class Manifest:
    """The committed remote state of one partition (immutable: changes make a new one)."""

    partition: str
    url: str
    endpoint_url: str | None = None
    log_start_offset: int = 0
    segments: tuple[RemoteSegment, ...] = field(default=())

    @property
    def start_offset(self) -> int | None:
        """The remote log start offset, None when the tier holds no segment."""
        if not self.segments:
            return None
        return max(self.segments[0].base_offset, self.log_start_offset)

    @property
    def end_offset(self) -> int:
        """The offset after the last remote segment (0 when none)."""
        return self.segments[-1].end_offset if self.segments else 0

    @property
    def size(self) -> int:
        """Bytes of the remote segments' ``.log`` objects."""
        return sum(s.size for s in self.segments)

    def keys(self) -> set[str]:
        """Every object key this manifest names (itself excluded; each once)."""
        return {o.key for s in self.segments for o in s.objects.values()}

    def with_segment(self, seg: RemoteSegment) -> Manifest:
        return replace(self, segments=(*self.segments, seg))

    def without_below(self, offset: int) -> Manifest:
        """Segments wholly below ``offset`` removed; the log start moved to ``offset``."""
        keep = tuple(s for s in self.segments if s.end_offset > offset)
        return replace(self, segments=keep, log_start_offset=max(self.log_start_offset, offset))

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["segments"] = list(doc["segments"])
        return json.dumps({"format": FORMAT, **doc}, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """ValueError on anything but a format-1 manifest."""
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not a seglog remote log manifest (format 1)")
        segs = tuple(
            RemoteSegment(
                base_offset=int(s["base_offset"]),
                end_offset=int(s["end_offset"]),
                size=int(s["size"]),
                max_timestamp=int(s["max_timestamp"]),
                upload_id=str(s["upload_id"]),
                uploaded_ms=int(s["uploaded_ms"]),
                objects={k: RemoteObject(**o) for k, o in s["objects"].items()},
                state=str(s.get("state", FINISHED)),
            )
            for s in doc["segments"]
        )
        return cls(
            partition=str(doc["partition"]),
            url=str(doc["url"]),
            endpoint_url=doc.get("endpoint_url"),
            log_start_offset=int(doc.get("log_start_offset", 0)),
            segments=segs,
        )

    def write_local(self, directory: pathlib.Path) -> None:
        """Atomically replace the partition directory's copy."""
        files.write_small_file(directory / LOCAL_MANIFEST, self.to_json())

    @staticmethod
    def read_local(directory: pathlib.Path) -> Manifest | None:
        """The partition directory's copy, None when missing or unreadable."""
        try:
            return Manifest.from_json((directory / LOCAL_MANIFEST).read_bytes())
        except (OSError, ValueError, KeyError, TypeError):
            return None
