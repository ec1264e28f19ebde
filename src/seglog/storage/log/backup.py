"""Backup mechanics of one open log (the consistent file plan taken under its write lock,
the copy or hard link of each file, the hidden partial directory renamed into place) and
``backup_log``, behind ``Log.backup``. Whole directories: ``seglog.storage.tools.backup``.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import pathlib
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seglog.errors import DirectoryNotFoundError, StorageError
from seglog.storage.fileio import files
from seglog.storage.index.offset_time import OffsetIndex, TimeIndex
from seglog.storage.index.txn_index import encode_entry
from seglog.storage.log.subscription import SUBSCRIPTIONS_DIR, backup_states
from seglog.storage.segment.transactions import TXN_SNAPSHOT, snapshot_bytes

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = [
    "BackupItem",
    "BackupReport",
    "Plan",
    "Progress",
    "backup_log",
    "fsync_tree",
    "partial_dir",
    "plan_log",
    "small_files",
    "write_plan",
]

Progress = Callable[[int, int], None]
"""``progress(bytes_done, bytes_total)``, called as files are copied."""

_SKIP_SUFFIXES = (
    ".log",
    ".index",
    ".timeindex",
    files.TXNINDEX_SUFFIX,
    ".deleted",
    ".cleaned",
    ".swap",
    ".bak",
)
_SKIP_NAMES = {files.CLEAN_SHUTDOWN, files.RECOVERY_POINT, "key-index", ".lock", TXN_SNAPSHOT}
_CHUNK = 1 << 20


@dataclass
class BackupItem:
    """One file of a backup or snapshot: ``size`` bytes from ``fd`` (a duplicate the
    plan owns) or the bytes ``data``; ``link`` names a file to hard-link instead when
    possible (a closed segment, whole)."""

    rel: str
    """Path inside the backup, ``/``-separated (``orders-0/00000000000000000000.log``)."""
    size: int
    """Bytes."""
    fd: int | None = None
    data: bytes | None = None
    link: pathlib.Path | None = None


@dataclass
class BackupReport:
    """What ``backup`` (or ``snapshot``) wrote."""

    source: str
    dest: str
    files: int = 0
    bytes: int = 0
    """Bytes of every file in the backup."""
    linked_bytes: int = 0
    """Bytes shared with the source through hard links (not copied)."""
    log_end_offsets: dict[str, int] = field(default_factory=dict)
    """Partition directory name → end offset of its backed-up prefix."""


class Plan:
    """The files to write, with their source handles (a context manager closing them)."""

    def __init__(self) -> None:
        self.items: list[BackupItem] = []
        self.log_end_offsets: dict[str, int] = {}

    @property
    def total_bytes(self) -> int:
        """Sum of the item sizes."""
        return sum(i.size for i in self.items)

    def close(self) -> None:
        """Close the duplicated file descriptors."""
        for item in self.items:
            if item.fd is not None:
                os.close(item.fd)
                item.fd = None

    def __enter__(self) -> Plan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _offset_index_bytes(index: OffsetIndex, limit: int) -> bytes:
    offsets, positions = index.entries()
    n = bisect.bisect_left(positions, limit)  # positions ascend: the entries below limit
    return index.image(offsets[:n], positions[:n])


def _time_index_bytes(index: TimeIndex, rel_limit: int) -> bytes:
    timestamps, offsets = index.entries()
    n = bisect.bisect_left(offsets, rel_limit)  # offsets ascend (not strictly)
    return index.image(timestamps[:n], offsets[:n])


def small_files(directory: pathlib.Path, prefix: str) -> Iterator[BackupItem]:
    for p in sorted(directory.iterdir()):
        name = p.name
        if not p.is_file() or name.startswith(".") or name in _SKIP_NAMES:
            continue
        if name.endswith(_SKIP_SUFFIXES) or name.endswith(".tmp"):
            continue
        with contextlib.suppress(FileNotFoundError):
            data = p.read_bytes()
            yield BackupItem(prefix + name, len(data), data=data)


def plan_log(log: Log, prefix: str, out: Plan) -> None:
    """Add the files of a consistent prefix of ``log`` (see the module docstring)."""
    if log.read_only:
        log.refresh()
    items: list[BackupItem] = []
    with log._state.lock:
        log._state.check_open()
        upper = log.high_watermark
        segs = [s for s in log._state.segments if s.base_offset < upper] or log._state.segments[:1]
        last_base = segs[-1].base_offset if segs else 0
        try:
            for seg in segs:
                size = seg.size
                length, end = size, seg.next_offset
                if seg.next_offset > upper:
                    found = seg.find(upper, size)
                    length, end = (found[0], upper) if found is not None else (size, end)
                whole = length == size and seg is not log._state.segments[-1]
                items.append(
                    BackupItem(
                        prefix + seg.path.name,
                        length,
                        fd=os.dup(seg.fd),
                        link=seg.path if whole else None,
                    )
                )
                idx = _offset_index_bytes(seg.index, length)
                tix = _time_index_bytes(seg.time_index, end - seg.base_offset)
                items.append(BackupItem(prefix + seg.index.path.name, len(idx), data=idx))
                items.append(BackupItem(prefix + seg.time_index.path.name, len(tix), data=tix))
                txn = b"".join(
                    encode_entry(e) for e in seg.txn_index.entries if e.last_offset < end
                )
                if txn:
                    items.append(BackupItem(prefix + seg.txn_index.path.name, len(txn), data=txn))
            if upper == log.log_end_offset:  # the transactions' state at the prefix's end
                snap = snapshot_bytes(upper, log._state.txns.ongoing)
                items.append(BackupItem(prefix + TXN_SNAPSHOT, len(snap), data=snap))
        except BaseException:
            for item in items:
                if item.fd is not None:
                    os.close(item.fd)
            raise
    rp = f"{last_base}\n".encode()
    items.append(BackupItem(prefix + files.RECOVERY_POINT, len(rp), data=rp))
    items.extend(small_files(log.directory, prefix))
    end = min(upper, log.log_end_offset)
    # read after ``upper``: a state newer than the copied prefix is capped at its end
    for name, data in backup_states(log.directory, end):
        items.append(BackupItem(f"{prefix}{SUBSCRIPTIONS_DIR}/{name}", len(data), data=data))
    out.items.extend(items)
    out.log_end_offsets[log.directory.name] = end


def copy_item(item: BackupItem, fd_out: int, progress: Callable[[int], None]) -> None:
    """Write ``item``'s bytes to ``fd_out`` (at its current position)."""
    if item.data is not None:
        view = memoryview(item.data)
        while view:
            view = view[os.write(fd_out, view) :]
        progress(len(item.data))
        return
    assert item.fd is not None
    pos = 0
    while pos < item.size:
        chunk = os.pread(item.fd, min(_CHUNK, item.size - pos), pos)
        if not chunk:
            raise StorageError(f"{item.rel}: source shorter than {item.size} bytes")
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd_out, view) :]
        pos += len(chunk)
        progress(len(chunk))


def _try_link(item: BackupItem, target: pathlib.Path) -> bool:
    if item.link is None or item.fd is None:
        return False
    try:
        os.link(item.link, target)
    except OSError:
        return False
    st, src = os.stat(target), os.fstat(item.fd)
    if (st.st_ino, st.st_dev) != (src.st_ino, src.st_dev) or st.st_size != item.size:
        target.unlink()  # the name now points at another file (rewritten meanwhile)
        return False
    os.fsync(item.fd)  # same inode: durable even under a relaxed flush policy
    return True


def partial_dir(dest: pathlib.Path) -> pathlib.Path:
    """The hidden temporary sibling a backup or restore writes before its final rename."""
    return dest.parent / f".{dest.name}.partial-{uuid.uuid4().hex[:12]}"


def fsync_tree(root: pathlib.Path) -> None:
    """fsync every directory under ``root`` (deepest first) and ``root``'s parent."""
    dirs = [pathlib.Path(d) for d, _, _ in os.walk(root)]
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        files.fsync_dir(d)
    files.fsync_dir(root.parent)


def write_plan(
    make_plan: Callable[[], Plan],
    source: str,
    dest: str | os.PathLike[str],
    progress: Progress | None = None,
) -> BackupReport:
    """Write the plan ``make_plan()`` returns into the new directory ``dest`` through a
    hidden partial directory (files fsynced, then directories, then renamed). Raises
    FileExistsError when ``dest`` exists, DirectoryNotFoundError when its parent does not,
    StorageError/OSError on I/O errors (nothing is left under ``dest`` then)."""
    target = pathlib.Path(dest)
    if target.exists():
        raise FileExistsError(f"backup destination {target} exists")
    if not target.parent.is_dir():
        raise DirectoryNotFoundError(f"no directory {target.parent}")
    tmp = partial_dir(target)
    report = BackupReport(source=source, dest=str(target))
    with make_plan() as p:
        total, done = p.total_bytes, 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        try:
            tmp.mkdir()
            for item in p.items:
                path = tmp / item.rel
                path.parent.mkdir(parents=True, exist_ok=True)
                if _try_link(item, path):
                    report.linked_bytes += item.size
                    advance(item.size)
                else:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    try:
                        copy_item(item, fd, advance)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                report.files += 1
                report.bytes += item.size
            fsync_tree(tmp)
            os.rename(tmp, target)
            files.fsync_dir(target.parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        report.log_end_offsets = dict(p.log_end_offsets)
    return report


def backup_log(
    log: Log, dest: str | os.PathLike[str], *, progress: Progress | None = None
) -> BackupReport:
    """Online, consistent backup of the open ``log`` into the new directory ``dest`` (see
    the module docstring of ``seglog.storage.tools.backup``). Same errors as
    :func:`write_plan`, plus LogClosedError."""

    def make_plan() -> Plan:
        out = Plan()
        try:
            plan_log(log, "", out)
        except BaseException:
            out.close()
            raise
        return out

    return write_plan(make_plan, str(log.directory), dest, progress)
