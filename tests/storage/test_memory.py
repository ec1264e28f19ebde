"""memory_log: the same Log in a private tmpfs directory, nothing on disk, nothing left
behind (the API itself runs on both backends through the ``make_log`` fixture)."""

from __future__ import annotations

import fcntl
import gc
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator

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


def test_public_names() -> None:
    assert seglog.memory_log is seglog.storage.memory_log is memory_log
    assert "memory_log" in seglog.__all__
    assert issubclass(MemoryLog, Log)
    assert issubclass(NoMemoryFilesystemError, StorageError)


def test_a_log_in_a_private_tmpfs_directory() -> None:
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


def test_settings_as_open_log() -> None:
    with pytest.raises(TypeError, match="no_such_setting"):
        memory_log(no_such_setting=1)
    with memory_log(flush_ms=None) as log:  # the default policy, asked for
        assert log.config.fsync_before_ack
        log.publish([Message(value=b"x")])
        assert log.fsync_count > 0
    with memory_log(flush_messages=10, segment_bytes=4096) as log:
        assert (log.config.flush_messages, log.config.flush_ms) == (10, None)
        assert log.config.segment_bytes == 4096


def test_nothing_left_after_garbage_collection_without_close() -> None:
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


def test_nothing_left_after_garbage_collection_with_subscriptions_and_gc_thread() -> None:
    """The state's long-lived helpers (the subscription registry, the GC thread) must not
    keep an unclosed memory log alive: it is still removed when garbage collected, and
    its subscriptions are closed with it (the data they read is gone)."""
    log = memory_log()
    log.publish([Message(value=b"%d" % i) for i in range(10)])
    sub = log.subscribe("w", max_in_flight=3)
    assert [d.offset for d in sub.fetch(10, 0)] == [0, 1, 2]
    log.start_gc(every_s=60.0)
    d = log.directory
    assert (d / "subscriptions" / "w.sub").exists()
    del log
    gc.collect()
    assert not d.exists()
    assert sub.closed
    with pytest.raises(LogClosedError):
        sub.fetch(1, 0)
    assert _fds_under(d) == []
    assert not any(t.name == f"seglog-gc-{d.name}" for t in threading.enumerate())


def test_nothing_left_at_exit_without_close(tmp_path: pathlib.Path) -> None:
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


@pytest.fixture
def ram_dir() -> Iterator[pathlib.Path]:
    """A private directory on /dev/shm (a tmpfs): stale-directory tests see only theirs."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="seglog-test-", dir=memory.default_ram_dir()))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _reaped() -> int:
    """The pid of a process that has exited and been reaped (gone: os.kill raises)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


_HOLDER = (
    "import sys\n"
    "from seglog.storage import Message, memory_log\n"
    "log = memory_log(ram_dir=sys.argv[1], segment_bytes=1024)\n"
    "log.publish([Message(value=b'x' * 100) for _ in range(50)])\n"
    "print(log.directory, flush=True)\n"
    "sys.stdin.read()\n"  # parked until killed (or its stdin closes)
)


def test_what_a_killed_process_left_is_removed_by_the_next_memory_log(
    ram_dir: pathlib.Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(ram_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        left = pathlib.Path(child.stdout.readline().strip())
        assert left.parent == ram_dir
        assert left.name.startswith(f"seglog-mem-{child.pid}-")
        with memory_log(ram_dir=ram_dir) as log:  # the owner is alive: never touched
            assert left.is_dir()
            assert log.directory.name.startswith(f"seglog-mem-{os.getpid()}-")
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
        if child.stdin is not None:
            child.stdin.close()
    assert left.is_dir()  # no finalizer ran: the leak
    assert any(left.iterdir())
    with memory_log(ram_dir=ram_dir) as log:
        assert not left.exists()  # removed by the next memory_log
        assert log.directory.exists()
        assert log.publish([Message(value=b"x")]) == 1
    assert os.listdir(ram_dir) == []


def test_remove_stale_keeps_live_foreign_and_locked_directories(ram_dir: pathlib.Path) -> None:
    dead = _reaped()
    me = os.getpid()
    names = {
        "stale": f"seglog-mem-{dead}-abc_12",  # owner gone, unlocked: removed
        "live": f"seglog-mem-{me}-abc_12",  # owner alive: kept
        "locked": f"seglog-mem-{dead}-locked",  # owner gone but the flock held: kept
        "old": "seglog-mem-abc_1234",  # no pid (older name): kept
        "other": f"other-{dead}-abc",  # not ours: kept
    }
    for name in names.values():
        (ram_dir / name).mkdir()
        (ram_dir / name / "f").write_bytes(b"x")
    (ram_dir / f"seglog-mem-{dead}-file").write_bytes(b"x")  # not a directory: kept
    (ram_dir / f"seglog-mem-{dead}-link").symlink_to(ram_dir / names["live"])  # kept
    fd = os.open(ram_dir / names["locked"], os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert memory.remove_stale(ram_dir) == [names["stale"]]
    finally:
        os.close(fd)
    assert sorted(os.listdir(ram_dir)) == sorted(
        [n for k, n in names.items() if k != "stale"]
        + [f"seglog-mem-{dead}-file", f"seglog-mem-{dead}-link"]
    )
    assert (ram_dir / names["live"] / "f").exists()  # not followed through the link
    assert memory.remove_stale(ram_dir) == [names["locked"]]  # the flock released
    assert memory.remove_stale(ram_dir / "missing") == []


def test_no_memory_filesystem_error_says_what_to_do(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory, "_candidates", lambda: [str(tmp_path)])
    with pytest.raises(NoMemoryFilesystemError) as info:
        memory_log()
    message = str(info.value)
    assert "ram_dir=" in message
    assert "tmpfs" in message
    assert "--shm-size" in message
    assert "open_log" in message
    doc = memory_log.__doc__ or ""
    assert "64 MiB" in doc
    assert "tmpfs" in doc


def test_nothing_written_to_the_current_directory_or_tmp(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


def test_two_memory_logs_are_independent() -> None:
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


def test_read_only_reader_and_backup_to_disk(tmp_path: pathlib.Path) -> None:
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


def test_refuses_a_directory_on_disk(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


def test_explicit_ram_dir() -> None:
    with memory_log(ram_dir="/dev/shm") as log:
        assert log.directory.parent == pathlib.Path("/dev/shm")
        assert log.publish([Message(value=b"x")]) == 1


def test_mounts_escapes() -> None:
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


def test_a_full_tmpfs_is_a_full_disk() -> None:
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
