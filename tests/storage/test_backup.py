"""Backup (online, consistent, hard links), snapshot to one stream, restore; crash
safety (no half result under the final name). (The CLI commands: tests/cli/test_backup_cmds.py.)"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import threading
import time

import pytest
from tests.storage._backups import files, make, values

from seglog import Message, open_log
from seglog.storage import DataDir, SnapshotError, backup, check, restore, snapshot


def test_backup_of_closed_log_hard_links(tmp_path):
    src = tmp_path / "src"
    make(src)
    report = backup(src, tmp_path / "b")
    dest = tmp_path / "b"
    assert report.log_end_offsets == {"src": 60}
    logs = sorted(p.name for p in src.glob("*.log"))
    assert logs == sorted(p.name for p in dest.glob("*.log"))
    for name in logs[:-1]:  # closed segments shared, the active one copied
        assert os.stat(src / name).st_ino == os.stat(dest / name).st_ino
    assert os.stat(src / logs[-1]).st_ino != os.stat(dest / logs[-1]).st_ino
    assert report.linked_bytes == sum(os.path.getsize(src / n) for n in logs[:-1])
    for p in src.glob("*.*index"):  # indexes written from memory equal the live ones
        assert (dest / p.name).read_bytes() == p.read_bytes()
    assert (dest / "seglog-format").read_text() == "1\n"
    assert check(dest)[0].ok
    assert not check(dest)[0].index_problems
    assert values(dest) == values(src)
    with open_log(dest, key_index=True) as log:  # a usable log: writable, key index rebuilt
        assert log.get_by_key(b"k3").value == b"v059"
        log.publish([Message(value=b"more")])
    assert values(src)[-1] == b"v059"  # the source is untouched by writes to the backup
    with pytest.raises(FileExistsError):
        backup(src, dest)


def test_backup_of_live_log_is_consistent_prefix(tmp_path):
    src = tmp_path / "src"
    stop = threading.Event()
    with open_log(src, create=True, segment_bytes=2000) as log:
        log.publish([Message(value=b"first")])

        def write() -> None:
            i = 0
            while not stop.is_set():
                log.publish([Message(value=b"%06d" % (i + j)) for j in range(5)])
                i += 5

        writer = threading.Thread(target=write)
        writer.start()
        try:
            ends = []
            for k in range(5):
                time.sleep(0.05)
                before = log.high_watermark
                target = log if k % 2 == 0 else src  # the live object, or a read-only open
                if k == 4:  # a snapshot of the live log, restored
                    report = snapshot(log, tmp_path / "s.tar")
                    restore(tmp_path / "s.tar", tmp_path / f"b{k}")
                else:
                    report = backup(target, tmp_path / f"b{k}")
                ends.append((before, report.log_end_offsets["src"]))
        finally:
            stop.set()
            writer.join()
    final = values(src)
    for k, (before, end) in enumerate(ends):
        dest = tmp_path / f"b{k}"
        assert end >= before > 0
        reports = check(dest)
        assert reports[0].ok, reports[0].problems
        got = values(dest)
        assert len(got) == end
        assert got == final[:end]


def test_backup_of_data_dir(tmp_path):
    d = tmp_path / "data"
    with DataDir(d) as dd:
        dd.create_topic("orders", 2, {"segment.bytes": "1000"})
        for p in range(2):
            dd.log("orders", p).publish([Message(value=b"%d-%d" % (p, i)) for i in range(30)])
        report = backup(d, tmp_path / "b")  # beside the live writer (read-only opens)
    assert report.log_end_offsets == {"orders-0": 30, "orders-1": 30}
    with DataDir(tmp_path / "b", create=False) as dd:
        assert dd.topics()["orders"].partitions == 2
        assert dd.log("orders", 1).consume(0, 100)[1][-1].value == b"1-29"
    assert all(r.ok for r in check(tmp_path / "b"))


def test_snapshot_restore_round_trip_byte_identical(tmp_path):
    src = tmp_path / "src"
    make(src, 80)
    snap = tmp_path / "s.tar"
    report = snapshot(src, snap)
    assert report.dest == str(snap)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with tarfile.open(snap) as tar:
        names = tar.getnames()
    assert names[-1] == "MANIFEST.json"
    restored = restore(snap, tmp_path / "r")
    assert restored.log_end_offsets == {"src": 80}
    backup(src, tmp_path / "b")
    assert files(tmp_path / "r") == files(tmp_path / "b")
    src_files = files(src)
    for name, data in files(tmp_path / "r").items():
        if name.endswith((".log", ".index", ".timeindex", "seglog-format")):
            assert src_files[name] == data, name
    assert values(tmp_path / "r") == values(src)
    # through a stream, twice: same bytes restored
    buf = io.BytesIO()
    snapshot(src, buf)
    buf.seek(0)
    restore(buf, tmp_path / "r2")
    assert files(tmp_path / "r2") == files(tmp_path / "r")


def test_restore_refuses_corrupt_or_truncated(tmp_path):
    src = tmp_path / "src"
    make(src, 20)
    buf = io.BytesIO()
    snapshot(src, buf)
    data = buf.getvalue()
    pos = data.index(b"v010")  # a byte of record data inside the first .log member
    flipped = data[:pos] + b"X" + data[pos + 1 :]
    for bad, words in (
        (flipped, "CRC-32C"),
        (data[: len(data) // 2], "unreadable|manifest"),
        (b"not a tar at all" * 100, "unreadable"),
    ):
        with pytest.raises(SnapshotError, match=words):
            restore(io.BytesIO(bad), tmp_path / "r")
        assert not (tmp_path / "r").exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    evil.seek(0)
    with pytest.raises(SnapshotError, match="unsafe"):
        restore(evil, tmp_path / "r")
    assert not (tmp_path / "escape").exists()


def test_failure_mid_backup_leaves_nothing(tmp_path):
    src = tmp_path / "src"
    make(src, 40)
    calls = []

    def boom(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 3:
            raise OSError("disk full (simulated by the progress callback)")

    with pytest.raises(OSError, match="disk full"):
        backup(src, tmp_path / "b", progress=boom)
    calls.clear()
    with pytest.raises(OSError, match="disk full"):
        snapshot(src, tmp_path / "s.tar", progress=boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


_SLOW = textwrap.dedent(
    """
    import sys, time
    from seglog.storage import backup, snapshot
    def slow(done, total):
        print(done, flush=True)
        time.sleep(0.01)
    op, src, dest = sys.argv[1:]
    (backup if op == "backup" else snapshot)(src, dest, progress=slow)
    print("done", flush=True)
    """
)


@pytest.mark.parametrize("op", ["backup", "snapshot"])
def test_kill_9_during_backup_leaves_no_half_result(tmp_path, op):
    src = tmp_path / "src"
    make(src, 60)
    dest = tmp_path / ("b" if op == "backup" else "s.tar")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW, op, str(src), str(dest)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for _ in range(5):  # a few files written, the result not yet renamed into place
        line = proc.stdout.readline()
        assert line
        assert line != "done\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert not dest.exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert len(leftovers) == 1
    assert leftovers[0].startswith(f".{dest.name}.")
    backup(src, tmp_path / "again")  # a later run is not disturbed by the leftover
    assert check(tmp_path / "again")[0].ok
