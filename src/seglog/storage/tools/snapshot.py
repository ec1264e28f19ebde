"""Snapshot of a log or data directory to one stream, and restore from it (InfluxDB's
Snapshot/Restore).

A snapshot is a POSIX tar stream (``tarfile`` "ustar"/pax, written and read
sequentially, so it can go through a pipe: ``seglog snapshot DIR - | ssh ...``) holding
exactly the files a ``backup`` would write (same consistent plan, see ``tools/backup.py``), then
a last member ``MANIFEST.json``::

    {"format": "seglog-snapshot", "version": 1, "created_ms": ..., "source": "...",
     "files": [{"path": "orders-0/00000000000000000000.log", "size": 1234,
                "crc32c": 305419896}, ...],
     "log_end_offsets": {"orders-0": 42}}

CRC-32C is computed while streaming, hence the manifest comes last. ``restore`` extracts
into a hidden ``.<dest>.partial-<hex>`` sibling, checks every file against the manifest
(size, CRC-32C, nothing missing or extra), fsyncs, then renames to ``dest``: a torn,
corrupt or truncated snapshot never produces ``dest``. A snapshot written to a file goes
to a temporary name first (fsync, rename), so a crash never leaves a half snapshot under
the final name.
"""

from __future__ import annotations

import errno
import io
import json
import os
import pathlib
import shutil
import tarfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

import crc32c

from seglog.errors import StorageError
from seglog.storage.fileio import files
from seglog.storage.log.log import Log
from seglog.storage.tools.backup import (
    BackupItem,
    BackupReport,
    Progress,
    fsync_tree,
    partial_dir,
    plan,
)

__all__ = ["MANIFEST", "RestoreReport", "SnapshotError", "restore", "snapshot"]

MANIFEST = "MANIFEST.json"
_FORMAT = "seglog-snapshot"
_CHUNK = 1 << 20


class SnapshotError(StorageError):
    """A snapshot stream that is truncated, corrupt (CRC-32C) or not a seglog snapshot."""


@dataclass
class RestoreReport:
    """What ``restore`` wrote."""

    dest: str
    files: int = 0
    bytes: int = 0
    log_end_offsets: dict[str, int] = field(default_factory=dict)


class _ItemReader(io.RawIOBase):
    """File-like view of a BackupItem for ``tarfile.addfile``; CRC-32C on the way."""

    def __init__(self, item: BackupItem, advance: Callable[[int], None]) -> None:
        self._item, self._pos, self._advance = item, 0, advance
        self.crc = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        item = self._item
        left = item.size - self._pos
        n = left if size < 0 else min(size, left)
        if n <= 0:
            return b""
        if item.data is not None:
            chunk = item.data[self._pos : self._pos + n]
        else:
            assert item.fd is not None
            chunk = os.pread(item.fd, n, self._pos)
        self._pos += len(chunk)
        self.crc = crc32c.crc32c(chunk, self.crc)
        self._advance(len(chunk))
        return chunk


def _write_stream(
    src: Log | str | os.PathLike[str], out: IO[bytes], progress: Progress | None
) -> BackupReport:
    report = BackupReport(source=str(getattr(src, "directory", src)), dest="")
    with plan(src) as p:
        total, done = p.total_bytes, 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        files = []
        mtime = int(time.time())
        with tarfile.open(
            fileobj=out,
            mode="w|",
            format=tarfile.PAX_FORMAT,
            bufsize=_CHUNK,
        ) as tar:
            # as bufsize: its stream re-slices the buffer per write (typeshed lacks the attribute)
            tar.copybufsize = _CHUNK  # type: ignore[attr-defined]
            for item in p.items:
                info = tarfile.TarInfo(item.rel)
                info.size, info.mtime, info.mode = item.size, mtime, 0o644
                reader = _ItemReader(item, advance)
                tar.addfile(info, reader)
                files.append({"path": item.rel, "size": item.size, "crc32c": reader.crc})
                report.files += 1
                report.bytes += item.size
            manifest = {
                "format": _FORMAT,
                "version": 1,
                "created_ms": time.time_ns() // 1_000_000,
                "source": report.source,
                "files": files,
                "log_end_offsets": p.log_end_offsets,
            }
            data = json.dumps(manifest, indent=1).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))
        report.log_end_offsets = dict(p.log_end_offsets)
    return report


def snapshot(
    src: Log | str | os.PathLike[str],
    out: str | os.PathLike[str] | IO[bytes],
    *,
    progress: Progress | None = None,
) -> BackupReport:
    """Write a consistent snapshot of ``src`` (open Log, partition or data directory) as
    a tar stream to ``out``: a path (through ``atomic_file``: a temporary name, fsynced,
    renamed, the directory fsynced; an existing file is replaced, and kept as it was on any
    error) or a binary file object (written sequentially; the caller owns it). Raises
    DirectoryNotFoundError (``src`` missing or holding no log), LogClosedError, OSError."""
    if not isinstance(out, (str, os.PathLike)):
        return _write_stream(src, out, progress)
    target = pathlib.Path(out)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    with files.atomic_file(target, tmp=tmp) as f:
        report = _write_stream(src, f, progress)
    report.dest = str(target)
    return report


def _safe_name(name: str) -> str:
    parts = pathlib.PurePosixPath(name).parts
    if not parts or name.startswith("/") or any(p in ("..", ".", "") for p in parts):
        raise SnapshotError(f"unsafe member name {name!r} in snapshot")
    return "/".join(parts)


def restore(
    src: str | os.PathLike[str] | IO[bytes],
    dest: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
) -> RestoreReport:
    """Restore a snapshot (a path or a readable binary stream) into the new directory
    ``dest``, checking every file against the manifest first. Raises FileExistsError
    when ``dest`` exists, SnapshotError for a truncated, corrupt or foreign stream (nothing
    left under ``dest``), FileNotFoundError when ``src`` is a path to no file."""
    target = pathlib.Path(dest)
    if target.exists():
        raise FileExistsError(f"restore destination {target} exists")
    if isinstance(src, (str, os.PathLike)):
        path = pathlib.Path(src)
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no snapshot file", str(path))
        with open(path, "rb") as f:
            return _restore_stream(f, target, progress, path.stat().st_size)
    return _restore_stream(src, target, progress, 0)


def _restore_stream(
    stream: IO[bytes], target: pathlib.Path, progress: Progress | None, total: int
) -> RestoreReport:
    tmp = partial_dir(target)
    report = RestoreReport(dest=str(target))
    seen: dict[str, tuple[int, int]] = {}
    manifest: dict[str, object] | None = None
    done = 0
    try:
        tmp.mkdir()
        with tarfile.open(fileobj=stream, mode="r|", bufsize=_CHUNK) as tar:
            for member in tar:
                name = _safe_name(member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    raise SnapshotError(f"unexpected member type for {name!r}")
                if manifest is not None:
                    raise SnapshotError(f"member {name!r} after the manifest")
                fobj = tar.extractfile(member)
                assert fobj is not None
                if name == MANIFEST:
                    manifest = json.loads(fobj.read())
                    continue
                path = tmp / name
                path.parent.mkdir(parents=True, exist_ok=True)
                crc = size = 0
                with open(path, "xb") as out:
                    while chunk := fobj.read(_CHUNK):
                        out.write(chunk)
                        crc = crc32c.crc32c(chunk, crc)
                        size += len(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, max(total, done))
                    out.flush()
                    os.fsync(out.fileno())
                seen[name] = (size, crc)
        _verify(manifest, seen)
        assert manifest is not None
        fsync_tree(tmp)
        os.rename(tmp, target)
        files.fsync_dir(target.parent)
    except (tarfile.TarError, EOFError, ValueError, KeyError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SnapshotError(f"unreadable snapshot: {e}") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report.files = len(seen)
    report.bytes = sum(s for s, _ in seen.values())
    offsets = manifest.get("log_end_offsets", {})
    report.log_end_offsets = dict(offsets) if isinstance(offsets, dict) else {}
    return report


def _verify(manifest: dict[str, object] | None, seen: dict[str, tuple[int, int]]) -> None:
    if manifest is None:
        raise SnapshotError("snapshot has no manifest (truncated stream?)")
    if manifest.get("format") != _FORMAT or manifest.get("version") != 1:
        raise SnapshotError("not a seglog snapshot (version 1)")
    files = manifest.get("files")
    if not isinstance(files, list):
        raise SnapshotError("manifest without a file list")
    listed = {}
    for f in files:
        listed[_safe_name(str(f["path"]))] = (int(f["size"]), int(f["crc32c"]))
    if listed.keys() != seen.keys():
        missing = sorted(listed.keys() - seen.keys())[:3]
        extra = sorted(seen.keys() - listed.keys())[:3]
        raise SnapshotError(f"files differ from the manifest: missing {missing}, extra {extra}")
    for name, (size, crc) in listed.items():
        if seen[name] != (size, crc):
            raise SnapshotError(
                f"{name}: {seen[name][0]} bytes, CRC-32C {seen[name][1]:#010x}; "
                f"manifest says {size} bytes, {crc:#010x}"
            )
