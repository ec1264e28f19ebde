"""memory_log: a log held in RAM only (NATS's memory store, aof's anonymous file).

``memory_log(**config)`` returns the same :class:`~seglog.storage.log.log.Log` as
``open_log`` (a :class:`MemoryLog`, its subclass adding only the cleanup and a wait at a
segment roll, below), so every
method and function of the embedded contract (``seglog.storage.api``: publish, consume,
get, by key, by time, blocking consume, the trims, ``compact``, ``delete_offsets``,
``stats``, ``backup``...) behaves exactly as on disk: there is no second engine.

How: the log lives in a private directory (``tempfile.mkdtemp``, mode 0700, named
``seglog-mem-<pid>-<random>`` after the owning process) on a RAM-backed filesystem,
tmpfs or ramfs, found by its mount in ``/proc/mounts`` (``/dev/shm`` first, then
``$XDG_RUNTIME_DIR``, or the ``ram_dir`` given). When none is available ``memory_log``
raises :class:`NoMemoryFilesystemError` instead of silently writing to disk. The page
cache *is* the storage there: fsync has nothing to do, so the log opens with a relaxed
flush (``flush_ms``, unless the caller sets ``flush_messages`` or ``flush_ms`` itself):
``publish`` returns without waiting for the fsync thread, and what is appended is
visible at once. The one thing the relaxed flush would change beyond that, rolled
segments waiting for a background round before retention, compaction or
``delete_offsets`` may touch them, is undone by :meth:`MemoryLog.append` (it waits for
that round when it rolls a segment), so maintenance sees what it sees on a log under the
default policy. ``flush_ms=None`` gives exactly the default policy (readers see appends
once "fsynced", ``fsync_count`` counts rounds); on tmpfs it costs no more.

What it means:

- memory only: everything is lost at ``close`` (the directory is removed), when the log is
  garbage collected without ``close`` (the log object, not its subscriptions, is what
  keeps it: a ``Subscription`` of a dropped memory log is closed with it, LogClosedError)
  or when the process exits (a ``weakref.finalize``,
  which also runs at exit); nothing is left behind and nothing is written to a disk
  (unless you ``backup`` it there). A process killed by a signal (kill -9) leaves its
  directory on the tmpfs; the next ``memory_log`` call in the same ``ram_dir``, from any
  process of the same user, removes it (:func:`remove_stale`: owner pid gone and the
  directory's writer flock free), else it stays until reboot;
- bounded by the filesystem's size, i.e. RAM (``/dev/shm`` is half of it by default, 64
  MiB in a default Docker container): a full tmpfs raises StorageError like a full disk
  (nothing stored is damaged); tmpfs pages may go to swap like any anonymous memory;
- :attr:`Log.directory` is a real directory, so ``open_log(log.directory,
  read_only=True)`` (a reader beside the writer, in this process or another) and
  ``log.backup(dest)`` / ``seglog.storage.backup`` (a copy to disk that outlives the log)
  work as for any log.
"""

from __future__ import annotations

import fcntl
import logging
import os
import pathlib
import re
import shutil
import stat
import tempfile
import weakref
from dataclasses import fields
from typing import Any

from seglog.errors import StorageError
from seglog.storage.config import AppendInfo, LogConfig
from seglog.storage.log import subscription
from seglog.storage.log.append import AppendOrigin
from seglog.storage.log.log import Log
from seglog.storage.log.state import LogState

__all__ = [
    "MEMORY_FLUSH_MS",
    "MemoryLog",
    "NoMemoryFilesystemError",
    "default_ram_dir",
    "memory_log",
    "ram_filesystem",
    "remove_stale",
]

MEMORY_FLUSH_MS = 60_000
"""flush.ms a memory log opens with unless told otherwise: readers see appends at once and
the background "fsync" (nothing to do on tmpfs) runs at most once a minute."""

_logger = logging.getLogger(__name__)

_RAM_FS_TYPES = frozenset({"tmpfs", "ramfs"})
_PREFIX = "seglog-mem-"
_OWNED = re.compile(r"seglog-mem-([0-9]+)-[A-Za-z0-9_]+")
"""A memory log's directory: ``seglog-mem-<owner pid>-<mkdtemp's random part>``."""

_ADVICE = (
    "a memory log needs a tmpfs or ramfs: mount one (e.g. `mount -t tmpfs -o size=512m "
    "tmpfs /mnt/seglog`, in Docker `--shm-size=512m` or `--tmpfs /mnt/seglog`) and pass "
    "ram_dir= a directory on it, or use open_log(path) on disk"
)


class NoMemoryFilesystemError(StorageError):
    """No RAM-backed filesystem (tmpfs or ramfs) to hold a memory log; the message says
    what was tried and how to provide one."""


def _unescape(field: str) -> str:
    r"""A /proc/mounts field: spaces, tabs, newlines and backslashes come octal (``\040``)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mounts() -> list[tuple[str, str]]:
    """(mount point, filesystem type) of every mount, in /proc/mounts order (a later mount
    over the same point hides an earlier one)."""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise NoMemoryFilesystemError(
            f"cannot read /proc/mounts to find a tmpfs for a memory log ({e}); {_ADVICE}"
        ) from e
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            out.append((_unescape(parts[1]), parts[2]))
    return out


def ram_filesystem(path: str | os.PathLike[str]) -> str | None:
    """The type (``"tmpfs"`` or ``"ramfs"``) of the RAM-backed filesystem holding the
    existing directory ``path``, or None when it is on any other filesystem (the mount
    point is the longest mount in /proc/mounts containing the resolved path)."""
    real = os.path.realpath(path)
    best, fstype = "", ""
    for point, kind in _mounts():
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, kind
    return fstype if fstype in _RAM_FS_TYPES else None


def _candidates() -> list[str]:
    out = ["/dev/shm"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        out.append(runtime)
    return out


def default_ram_dir() -> str:
    """The directory memory logs are created in by default: ``/dev/shm``, else
    ``$XDG_RUNTIME_DIR``, if on tmpfs or ramfs and writable; NoMemoryFilesystemError
    otherwise (what ``memory_log`` would raise)."""
    return _ram_dir(None)


def _ram_dir(ram_dir: str | os.PathLike[str] | None) -> str:
    """The directory to create the log's private directory in: ``ram_dir`` (checked) or
    the first usable default; NoMemoryFilesystemError otherwise."""
    if ram_dir is not None:
        base = os.fspath(ram_dir)
        if not os.path.isdir(base):
            raise NoMemoryFilesystemError(f"ram_dir {base} is not a directory; {_ADVICE}")
        if ram_filesystem(base) is None:
            raise NoMemoryFilesystemError(
                f"ram_dir {base} is not on a tmpfs or ramfs (a memory log never writes to "
                f"disk); {_ADVICE}"
            )
        return base
    tried = []
    for base in _candidates():
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            if ram_filesystem(base) is not None:
                return base
            tried.append(f"{base} (not tmpfs)")
        else:
            tried.append(f"{base} (missing or not writable)")
    raise NoMemoryFilesystemError(
        "no tmpfs or ramfs for a memory log (tried " + ", ".join(tried) + f"); {_ADVICE}"
    )


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (possibly another user's: EPERM means it does)."""
    if pid <= 0:
        return True  # never a real owner: keep, whatever it is
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(base: str | os.PathLike[str]) -> list[str]:
    """Remove the memory logs left in ``base`` by processes that died without closing them
    (kill -9, a crash, os._exit: no finalizer ran); returns the names removed.

    Only directories this module created are candidates: named
    ``seglog-mem-<pid>-<random>`` (older, pid-less names are left alone), a real directory
    (not a symlink) owned by this user. One is removed only when its owner pid no longer
    exists (``os.kill(pid, 0)`` raises ProcessLookupError) *and* nobody holds the writer
    flock on it (a live log always does, whatever pid namespace its process is in): the
    flock is held while it is removed. A reused pid keeps a stale directory (until that
    process is gone too); in the instant between ``mkdtemp`` and the flock a new log is
    protected by its pid alone. Never raises: a directory it cannot check or remove is
    left for the next call."""
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    uid = os.geteuid()
    for name in names:
        m = _OWNED.fullmatch(name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a live log (another pid namespace), or cannot tell
            os.close(fd)
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)
        if not os.path.lexists(path):
            _logger.info("removed a memory log left by dead process %s: %s", m.group(1), path)
            removed.append(name)
    return removed


def _discard(state: LogState, root: str) -> None:
    """Close the log's state (idempotent) and remove its directory: run by ``close``, by
    the finalizer when the log is garbage collected unclosed, or at exit. Holds no
    reference to the Log object itself (a finalizer must not). Never raises: the data is
    being thrown away (e.g. the clean-shutdown marker not written on a full tmpfs)."""
    try:
        shell = object.__new__(Log)  # Log.close is a function of the state only
        shell._state = state
        Log.close(shell)
    except Exception as e:  # a finalizer: report, never raise
        _logger.warning("closing memory log %s: %s", root, e)
    finally:
        if state.lock_fd is not None:  # a close that failed half-way
            os.close(state.lock_fd)
            state.lock_fd = None
        shutil.rmtree(root, ignore_errors=True)


class MemoryLog(Log):
    """A :class:`Log` in a private directory on tmpfs, removed when it closes (see
    :func:`memory_log`). Everything but ``close`` (and the roll wait of ``append``) is
    ``Log``'s."""

    _discard: weakref.finalize[[LogState, str], MemoryLog] | None = None

    def append(
        self, records: bytes | bytearray | memoryview, *, origin: AppendOrigin = "client"
    ) -> AppendInfo:
        """As ``Log.append``; when it rolled a segment, wait for the group commit round
        that closes the rolled one (microseconds on tmpfs). Under the relaxed flush a
        rolled segment is left to the next background round, and until then retention,
        compaction and ``delete_offsets`` skip it: this keeps them as prompt as on a log
        under the default policy (``publish``/``publish_values`` append through here)."""
        info = super().append(records, origin=origin)
        if self._state.rolled_unsynced and self._state.group_commit is not None:
            self.sync()
        return info

    def _state_view(self) -> Log:
        """A plain Log sharing this one's state but not this object: what the state's own
        long-lived helpers hold (the subscription registry and its subscriptions, the GC
        thread). Were they to hold this object, the finalizer (which holds the state)
        would keep it alive forever and an unclosed memory log would never be removed
        before exit. Every Log method is a function of the state alone."""
        view = object.__new__(Log)
        view._state = self._state
        return view

    def _registry(self) -> subscription.Subscriptions:
        """As ``Log._registry``, over :meth:`_state_view`: a subscription does not keep
        the memory log alive (dropping the log closes its subscriptions, as its data is
        gone)."""
        st = self._state
        with st.lock:
            if st.subscriptions is None:
                st.subscriptions = subscription.Subscriptions(self._state_view())
            return st.subscriptions

    def start_gc(self, every_s: float = 60.0, unused_for_s: float = 300.0) -> None:
        """As ``Log.start_gc``; the thread holds :meth:`_state_view`, not this object."""
        Log.start_gc(self._state_view(), every_s, unused_for_s)

    def close(self) -> None:
        """As ``Log.close``, then remove the log's directory and everything in it (the data
        is gone), even when ``Log.close`` raises (its error is raised after). Idempotent."""
        try:
            super().close()
        finally:
            if self._discard is not None:
                self._discard()

    def __repr__(self) -> str:
        return "Memory" + super().__repr__()


def memory_log(
    *,
    key_index: bool = False,
    ram_dir: str | os.PathLike[str] | None = None,
    **config: Any,
) -> MemoryLog:
    """A new, empty log held in RAM (a private directory on tmpfs), with ``open_log``'s API
    and semantics; removed, data and all, at ``close``, garbage collection or process exit.

    ``config``: LogConfig fields by name, as ``open_log`` (TypeError on an unknown one);
    ``flush_ms`` defaults to :data:`MEMORY_FLUSH_MS` unless ``flush_ms`` or
    ``flush_messages`` is given (pass ``flush_ms=None`` for the default policy's
    visible-once-fsynced behaviour). ``ram_dir``: where to create the log's directory (must
    be on tmpfs/ramfs; default ``/dev/shm``, then ``$XDG_RUNTIME_DIR``).

    Requirements and limits: a tmpfs (or ramfs) mounted and writable, else
    NoMemoryFilesystemError (a StorageError, its message says how to provide one: mount a
    tmpfs and pass ``ram_dir``, give a container more ``/dev/shm``, or use ``open_log``).
    The log can hold no more than the free space of that filesystem, which is RAM: tmpfs
    defaults to half of it, and **Docker's default /dev/shm is 64 MiB** (``docker run
    --shm-size=1g`` or ``--tmpfs /mnt/seglog:size=1g`` plus ``ram_dir="/mnt/seglog"`` for
    more); Kubernetes pods get a ``/dev/shm`` as small unless given an ``emptyDir`` with
    ``medium: Memory``. Plan for segments, indexes and subscription journals, all of
    which count: a full tmpfs raises StorageError on append as a full disk would (what is
    stored stays readable). ramfs has no size limit at all, so a runaway log there can
    exhaust the machine's memory.

    Creating a memory log first removes the directories that processes killed without
    closing theirs left in the same directory (:func:`remove_stale`).
    """
    known = {f.name for f in fields(LogConfig)}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown log settings: {sorted(unknown)}")
    if "flush_ms" not in config and "flush_messages" not in config:
        config["flush_ms"] = MEMORY_FLUSH_MS
    cfg = LogConfig(key_index=key_index, **config)
    base = _ram_dir(ram_dir)
    remove_stale(base)  # what killed processes left behind (never raises)
    root = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=base)
    try:
        log = MemoryLog.open(pathlib.Path(root), cfg, create=True)
        assert isinstance(log, MemoryLog)  # Log.open builds its cls
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    # weakref.finalize runs at garbage collection or, if still alive, at exit (atexit)
    log._discard = weakref.finalize(log, _discard, log._state, root)
    return log
