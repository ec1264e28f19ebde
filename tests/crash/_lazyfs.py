"""A FUSE filesystem (fusepy, libfuse2) that forgets everything not fsynced on "power loss".

Run as ``python _lazyfs.py MOUNTPOINT`` (a subprocess of the test); it serves until
unmounted. Everything lives in memory, in two images:

- the *live* image, what processes see: file contents and directory entries;
- the *durable* image: a file's contents as of its last fsync/fdatasync, a directory's
  entries as of its last fsync (creates, renames and unlinks are durable only then).

Control: writing a command line to ``MOUNTPOINT/.lazyfs`` runs it synchronously:

- ``powerloss [seed]``: replace the live image by the durable one (names not made durable
  vanish, files whose name is durable but contents never synced come back empty); with a
  seed, a file whose unsynced change is an append keeps a random prefix of the appended
  bytes (a torn write: part of the page cache reached the disk);
- ``fsync_eio <n>``: the next ``n`` file fsyncs fail with EIO (n = -1: all of them), and,
  as Linux does after a writeback error, the failed data is dropped from the durable image
  (never retried);
- ``fsync_delay <seconds> <substring>``: every file fsync of a path containing
  ``substring`` sleeps that long first (``fsync_delay 0 x`` ends it): a slow disk under
  one partition, while the rest of the filesystem answers at once (mounted with
  ``--threads``: requests run in parallel, each under one lock, the sleep outside it);
- ``reset_counters``.

Reading ``MOUNTPOINT/.lazyfs`` returns JSON counters: ``fsync``, ``fsyncdir``,
``fsync_eio``, ``writes``, ``powerloss``, and ``fsync_after_eio`` (file fsyncs received
after the first injected EIO: a log that retries shows up here).
Mount options: ``direct_io`` and zero attribute/entry timeouts, so the kernel caches
nothing that could survive a power loss.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import random
import stat
import sys
import threading
import time
from typing import Any

from fuse import FUSE, FuseOSError, Operations

CONTROL = ".lazyfs"


class _Inode:
    def __init__(self, is_dir: bool) -> None:
        self.is_dir = is_dir
        self.data = bytearray()  # live contents (files)
        self.durable_data = b""  # contents at the last fsync
        self.entries: dict[str, _Inode] = {}  # live entries (directories)
        self.durable_entries: dict[str, _Inode] = {}
        self.mtime = time.time()


class LazyFS(Operations):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(self) -> None:
        self.root = _Inode(True)
        self.handles: dict[int, tuple[_Inode, int]] = {}
        self._fh = itertools.count(10)
        self.eio_left = 0
        self.counters = {
            "fsync": 0,
            "fsyncdir": 0,
            "fsync_eio": 0,
            "writes": 0,
            "powerloss": 0,
            "fsync_after_eio": 0,
            "torn_files": 0,
        }
        self._torn: random.Random | None = None
        self._eio_seen = False
        self._control_out = b""
        self._lock = threading.Lock()
        self.fsync_delay: tuple[float, str] = (0.0, "")

    def __call__(self, op: str, *args: Any) -> Any:
        """Every request under one lock (``--threads``); a delayed fsync sleeps first."""
        delay, where = self.fsync_delay
        if op == "fsync" and delay > 0 and args and where in str(args[0]):
            time.sleep(delay)
        with self._lock:
            return super().__call__(op, *args)

    # -- helpers -------------------------------------------------------------------------

    def _lookup(self, path: str) -> _Inode:
        node = self.root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            if not node.is_dir or part not in node.entries:
                raise FuseOSError(errno.ENOENT)
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[_Inode, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self._lookup(head or "/")
        if not parent.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        return parent, name

    def _node(self, path: str | None, fh: int | None) -> _Inode:
        if fh is not None and fh in self.handles:
            return self.handles[fh][0]
        if path is None:
            raise FuseOSError(errno.EBADF)
        return self._lookup(path)

    def _new_fh(self, node: _Inode, flags: int) -> int:
        fh = next(self._fh)
        self.handles[fh] = (node, flags)
        return fh

    # -- control file --------------------------------------------------------------------

    def _control(self, line: str) -> None:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "powerloss":
            self.counters["powerloss"] += 1
            self._torn = random.Random(int(arg)) if arg else None
            self._power_loss(self.root, set())
        elif cmd == "fsync_eio":
            self.eio_left = int(arg)
        elif cmd == "fsync_delay":
            seconds, _, where = arg.partition(" ")
            self.fsync_delay = (float(seconds), where)
        elif cmd == "reset_counters":
            self.counters = dict.fromkeys(self.counters, 0)
            self._eio_seen = False
        elif cmd:
            raise FuseOSError(errno.EINVAL)

    def _power_loss(self, node: _Inode, seen: set[int]) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if node.is_dir:
            node.entries = dict(node.durable_entries)
            for child in node.entries.values():
                self._power_loss(child, seen)
        else:
            durable, live = node.durable_data, node.data
            if self._torn is not None and len(live) > len(durable) and live.startswith(durable):
                # a torn write: part of the unsynced appended bytes reached the disk
                keep = self._torn.randint(0, len(live) - len(durable))
                node.data = bytearray(live[: len(durable) + keep])
                self.counters["torn_files"] += keep > 0
            else:
                node.data = bytearray(durable)

    # -- filesystem operations -----------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        if path == "/" + CONTROL:
            mode, size, nlink = stat.S_IFREG | 0o644, len(self._control_out), 1
        else:
            node = self._node(path, fh)
            if node.is_dir:
                mode, size, nlink = stat.S_IFDIR | 0o755, 4096, 2
            else:
                mode, size, nlink = stat.S_IFREG | 0o644, len(node.data), 1
            t = node.mtime
            return {
                "st_mode": mode,
                "st_size": size,
                "st_nlink": nlink,
                "st_atime": t,
                "st_mtime": t,
                "st_ctime": t,
            }
        return {"st_mode": mode, "st_size": size, "st_nlink": nlink}

    def readdir(self, path: str, fh: int) -> list[str]:
        node = self._lookup(path)
        names = [".", "..", *node.entries]
        if path == "/":
            names.append(CONTROL)
        return names

    def opendir(self, path: str) -> int:
        return self._new_fh(self._lookup(path), 0)

    def releasedir(self, path: str, fh: int) -> int:
        self.handles.pop(fh, None)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        node = self._node(path, fh)
        self.counters["fsyncdir"] += 1
        node.durable_entries = dict(node.entries)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        parent, name = self._parent(path)
        if name in parent.entries:
            raise FuseOSError(errno.EEXIST)
        parent.entries[name] = _Inode(True)
        return 0

    def rmdir(self, path: str) -> int:
        parent, name = self._parent(path)
        node = self._lookup(path)
        if node.entries:
            raise FuseOSError(errno.ENOTEMPTY)
        del parent.entries[name]
        return 0

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        if path == "/" + CONTROL:
            self._control_out = json.dumps(self.counters).encode()
            return 1
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            node = parent.entries[name] = _Inode(False)
        return self._new_fh(node, os.O_WRONLY)

    def open(self, path: str, flags: int) -> int:
        if path == "/" + CONTROL:
            self._control_out = json.dumps(self.counters).encode()
            return 1
        node = self._lookup(path)
        if node.is_dir:
            raise FuseOSError(errno.EISDIR)
        if flags & os.O_TRUNC:
            node.data.clear()
        return self._new_fh(node, flags)

    def release(self, path: str, fh: int) -> int:
        self.handles.pop(fh, None)
        return 0

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        if fh == 1:
            return self._control_out[offset : offset + size]
        node = self._node(path, fh)
        return bytes(node.data[offset : offset + size])

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        if fh == 1:
            self._control(data.decode())
            return len(data)
        node, flags = self.handles.get(fh, (self._node(path, None), 0))
        if flags & os.O_APPEND:
            offset = len(node.data)
        self.counters["writes"] += 1
        if offset > len(node.data):
            node.data.extend(b"\0" * (offset - len(node.data)))
        node.data[offset : offset + len(data)] = data
        node.mtime = time.time()
        return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if path == "/" + CONTROL:
            return 0
        node = self._node(path, fh)
        if length < len(node.data):
            del node.data[length:]
        else:
            node.data.extend(b"\0" * (length - len(node.data)))
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        if fh == 1:
            return 0
        node = self._node(path, fh)
        self.counters["fsync"] += 1
        if self._eio_seen:
            self.counters["fsync_after_eio"] += 1
        if self.eio_left:
            self.eio_left -= 1
            self._eio_seen = True
            self.counters["fsync_eio"] += 1
            # writeback error: the dirty data is lost for good (the page cache keeps it
            # but marks it clean, so it never reaches the disk)
            raise FuseOSError(errno.EIO)
        node.durable_data = bytes(node.data)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def unlink(self, path: str) -> int:
        parent, name = self._parent(path)
        if name not in parent.entries:
            raise FuseOSError(errno.ENOENT)
        del parent.entries[name]
        return 0

    def rename(self, old: str, new: str) -> int:
        op, oname = self._parent(old)
        np, nname = self._parent(new)
        if oname not in op.entries:
            raise FuseOSError(errno.ENOENT)
        node = op.entries.pop(oname)
        np.entries[nname] = node
        return 0

    def link(self, target: str, source: str) -> int:
        node = self._lookup(source)
        parent, name = self._parent(target)
        if name in parent.entries:
            raise FuseOSError(errno.EEXIST)
        parent.entries[name] = node
        return 0

    def chmod(self, path: str, mode: int) -> int:
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str, times: tuple[float, float] | None = None) -> int:
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        return {
            "f_bsize": 4096,
            "f_frsize": 4096,
            "f_blocks": 1 << 20,
            "f_bfree": 1 << 19,
            "f_bavail": 1 << 19,
            "f_files": 1 << 16,
            "f_ffree": 1 << 15,
            "f_namemax": 255,
        }


def main() -> None:
    """Mount on ``sys.argv[1]`` in the foreground until unmounted (``--threads`` as
    ``sys.argv[2]``: serve requests in parallel, as ``fsync_delay`` needs)."""
    FUSE(
        LazyFS(),
        sys.argv[1],
        foreground=True,
        nothreads=sys.argv[2:] != ["--threads"],
        direct_io=True,
        hard_remove=True,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )


if __name__ == "__main__":
    main()
