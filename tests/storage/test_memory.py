"""memory_log: the same Log in a private tmpfs directory, nothing on disk, nothing left
behind (the API itself runs on both backends through the ``make_log`` fixture)."""

from __future__ import annotations

import gc
import os
import pathlib
import stat
import subprocess
import sys
import tempfile
import threading

import pytest

import seglog
import seglog.storage
from seglog.errors import LogClosedError, StorageError
from seglog.storage import (
    OFFSET_OLDEST,
    Log,
    MemoryLog,
    Message,
    NoMemoryFilesystemError,
    compact,
    memory_log,
    open_log,
    trim_by_count,
)
from seglog.storage.log import memory

from .conftest import no_ram_filesystem

pytestmark = pytest.mark.skipif(no_ram_filesystem() is not None, reason="no tmpfs or ramfs")


def _fds_under(path: pathlib.Path) -> list[str]:
    """This process's open file descriptors pointing into ``path``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == str(path) or target.startswith(f"{path}/"):
            out.append(target)
    return out


def test_public_names():
    assert seglog.memory_log is seglog.storage.memory_log is memory_log
    assert "memory_log" in seglog.__all__
    assert issubclass(MemoryLog, Log)
    assert issubclass(NoMemoryFilesystemError, StorageError)


def test_a_log_in_a_private_tmpfs_directory():
    with memory_log(key_index=True) as log:
        assert isinstance(log, Log)
        assert isinstance(log, MemoryLog)
        d = log.directory
        assert d.name.startswith("seglog-mem-")
        assert memory.ram_filesystem(d) in ("tmpfs", "ramfs")
        assert stat.S_IMODE(d.stat().st_mode) == 0o700  # mkdtemp: private
        assert log.config.flush_ms == memory.MEMORY_FLUSH_MS
        assert log.publish([Message(key=b"k", value=b"v")]) == 1
        assert log.get_by_key(b"k").value == b"v"
        assert repr(log).startswith("MemoryLog(")
    assert not d.exists()
    assert _fds_under(d) == []
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        log.publish([Message(value=b"x")])
    with pytest.raises(LogClosedError):
        log.consume(OFFSET_OLDEST, 1)


def test_settings_as_open_log():
    with pytest.raises(TypeError, match="no_such_setting"):
        memory_log(no_such_setting=1)
    with memory_log(flush_ms=None) as log:  # the default policy, asked for
        assert log.config.fsync_before_ack
        log.publish([Message(value=b"x")])
        assert log.fsync_count > 0
    with memory_log(flush_messages=10, segment_bytes=4096) as log:
        assert (log.config.flush_messages, log.config.flush_ms) == (10, None)
        assert log.config.segment_bytes == 4096


def test_nothing_left_after_garbage_collection_without_close():
    log = memory_log()
    log.publish([Message(value=b"%d" % i) for i in range(100)])
    d = log.directory
    thread_name = f"seglog-sync-{d.name}"
    assert any(t.name == thread_name for t in threading.enumerate())
    del log
    gc.collect()
    assert not d.exists()
    assert _fds_under(d) == []
    assert not any(t.name == thread_name for t in threading.enumerate())  # fsync thread gone


def test_nothing_left_at_exit_without_close(tmp_path):
    code = (
        "from seglog.storage import Message, memory_log\n"
        "log = memory_log(segment_bytes=1024)\n"
        "log.publish([Message(value=b'x' * 100) for _ in range(50)])\n"
        "print(log.directory, flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    d = pathlib.Path(out.stdout.strip())
    assert d.name.startswith("seglog-mem-")
    assert not d.exists()


def test_nothing_written_to_the_current_directory_or_tmp(tmp_path, monkeypatch):
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # what mkdtemp() uses by default
    monkeypatch.setenv("TMPDIR", str(tmp))
    with memory_log(key_index=True, segment_bytes=1024) as log:
        for i in range(200):
            log.publish([Message(key=b"k%d" % (i % 5), value=b"v" * 50)])
        log.publish_values([b"a", b"b"], [b"k0", b"k1"])
        compact(log)
        trim_by_count(log, 100)
        assert log.consume(OFFSET_OLDEST, 1)[1]
        assert not str(log.directory).startswith((str(cwd), str(tmp)))
    assert os.listdir(cwd) == []
    assert os.listdir(tmp) == []


def test_two_memory_logs_are_independent():
    a, b = memory_log(), memory_log(key_index=True)
    try:
        assert a.directory != b.directory
        a.publish([Message(key=b"k", value=b"a%d" % i) for i in range(3)])
        b.publish([Message(key=b"k", value=b"b")])
        assert a.next_offset() == 3
        assert b.next_offset() == 1
        assert [m.value for m in a.consume(OFFSET_OLDEST, 10)[1]] == [b"a0", b"a1", b"a2"]
        assert b.get_by_key(b"k").value == b"b"
        a.close()
        assert not a.directory.exists()
        assert b.publish([Message(value=b"after")]) == 2  # the other one lives on
        assert [m.value for m in b.consume(OFFSET_OLDEST, 10)[1]] == [b"b", b"after"]
    finally:
        a.close()
        b.close()
    assert not b.directory.exists()


def test_read_only_reader_and_backup_to_disk(tmp_path):
    dest = tmp_path / "copy"
    with memory_log(segment_bytes=1024) as log:
        log.publish([Message(key=b"k%d" % i, value=b"v" * 40) for i in range(40)])
        with open_log(log.directory, read_only=True) as ro:  # a reader beside the writer
            assert ro.log_end_offset == 40
            log.publish([Message(value=b"more")])
            assert ro.refresh() == 41
        report = log.backup(dest)
        assert report is not None
    with open_log(dest) as copy:  # the backup outlives the memory log
        msgs = copy.consume(OFFSET_OLDEST, 100)[1]
        assert [m.offset for m in msgs] == list(range(41))
        assert msgs[-1].value == b"more"


def test_refuses_a_directory_on_disk(tmp_path, monkeypatch):
    assert memory.ram_filesystem(tmp_path) is None
    with pytest.raises(NoMemoryFilesystemError, match="not on a tmpfs"):
        memory_log(ram_dir=tmp_path)
    with pytest.raises(NoMemoryFilesystemError, match="not a directory"):
        memory_log(ram_dir=tmp_path / "missing")
    # no tmpfs among the defaults: a clear error, never a silent fallback to disk
    monkeypatch.setattr(memory, "_candidates", lambda: [str(tmp_path), "/nonexistent"])
    with pytest.raises(NoMemoryFilesystemError, match="no tmpfs or ramfs"):
        memory_log()
    assert os.listdir(tmp_path) == []


def test_explicit_ram_dir():
    with memory_log(ram_dir="/dev/shm") as log:
        assert log.directory.parent == pathlib.Path("/dev/shm")
        assert log.publish([Message(value=b"x")]) == 1


def test_mounts_escapes():
    assert memory._unescape(r"/mnt/with\040space\134x") == "/mnt/with space\\x"
    assert memory._unescape("/plain") == "/plain"


_FULL_TMPFS = """
import os
from seglog.errors import LogClosedError, StorageError
from seglog.storage import Message, memory_log
log = memory_log(ram_dir="/mnt", segment_bytes=64 * 1024, index_interval_bytes=64)
n = 0
try:
    while True:
        log.publish([Message(key=b"k", value=b"x" * 500)])
        n += 1
except StorageError as e:
    assert not isinstance(e, LogClosedError), e
assert n > 100
assert [m.offset for m in log.consume(0, 10**6)[1]] == list(range(n))  # nothing damaged
try:
    log.close()  # Log.close may fail to write its marker: the directory goes anyway
except OSError:
    pass
assert os.listdir("/mnt") == [], os.listdir("/mnt")
print("ok", n)
"""


def test_a_full_tmpfs_is_a_full_disk():
    """A 256 KiB tmpfs in a private mount namespace (``unshare``, skipped where not
    permitted): the append failing with StorageError, no SIGBUS from the mmapped indexes,
    everything stored still readable, nothing left after close."""
    script = 'mount -t tmpfs -o size=256k tmpfs /mnt && exec "$PYTHON" -c "$SCRIPT"'
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "PYTHON": sys.executable,
        "SCRIPT": _FULL_TMPFS,
    }
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("no unshare/mount of a tmpfs here")
    out = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("ok")
