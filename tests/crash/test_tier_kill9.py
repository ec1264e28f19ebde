"""kill -9 during tiered-storage uploads (KIP-405): a child process runs ``tier_sync`` and
SIGKILLs itself after its N-th object put or manifest commit, for N = 1, 2, ... until a
run completes. After each crash the reopened log must show nothing half-committed: every
segment the manifest names has all its objects, whole (CRC-32C checked on read); no object
outside the manifest survives the reopen (orphans deleted); nothing local was deleted for
an upload that did not commit; and the next pass completes the uploads."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

from seglog.storage import OFFSET_OLDEST, Log, LogConfig, Message, RemoteStorage, tier_sync

N_RECORDS = 70
CONFIG = LogConfig(segment_messages=20, remote_storage_enable=True, local_retention_bytes=0)

CHILD = """
import os, signal, sys
from seglog.storage import Log, LogConfig, RemoteStorage, tier_sync
from seglog.storage.segment import swap
path, url, cache, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
seen = 0
def hook(name):
    global seen
    if name.startswith("remote-"):
        seen += 1
        if seen == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
cfg = LogConfig(segment_messages=20, remote_storage_enable=True, local_retention_bytes=0)
with Log.open(path, cfg, remote=RemoteStorage(url, cache_dir=cache)) as log:
    with swap.stepping(hook):
        tier_sync(log)
print("done", seen)
"""


def _fill(path: pathlib.Path, remote: RemoteStorage) -> None:
    with Log.open(path, CONFIG, create=True, remote=remote) as log:
        for i in range(N_RECORDS):
            log.publish([Message(value=b"v%03d" % i, timestamp=1000 + i)])


def _objects(root: pathlib.Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_kill9_between_put_and_commit_leaves_nothing_half_committed(
    tmp_path: pathlib.Path,
) -> None:
    kill_at = 1
    while True:
        work = tmp_path / f"run{kill_at}"
        tier_dir = work / "tier"
        remote = RemoteStorage(f"file://{tier_dir}", cache_dir=str(work / "cache"))
        _fill(work / "p-0", remote)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(work / "p-0"), remote.url, str(work / "cache"),
             str(kill_at)],
            capture_output=True, text=True, check=False, env=os.environ.copy(),
        )  # fmt: skip
        if done.returncode == 0:
            assert done.stdout.startswith("done")
            break
        assert done.returncode == -signal.SIGKILL, done.stderr
        with Log.open(work / "p-0", CONFIG, remote=remote) as log:
            tier = log.remote_tier
            assert tier is not None
            manifest = tier.manifest
            # no orphan survives the writer's open; what the manifest names is there
            names = {str(pathlib.Path(k)) for k in manifest.keys()}  # noqa: SIM118 - a method
            assert _objects(tier_dir) - {f"{tier.partition}/manifest.json"} == names
            # every local segment not committed is still on local disk, every offset reads
            committed = {s.base_offset for s in manifest.segments}
            local = {s.base_offset for s in log.segments()}
            assert set(range(0, N_RECORDS - 10, 20)) <= committed | local
            _, msgs = log.consume(OFFSET_OLDEST, 1000)
            assert [m.value for m in msgs] == [b"v%03d" % i for i in range(N_RECORDS)]
            # the next pass finishes the job
            report = tier_sync(log)
            assert report.error is None
            assert [s.base_offset for s in tier.manifest.segments] == [0, 20, 40]
            assert [s.base_offset for s in log.segments()] == [60]
            _, msgs = log.consume(OFFSET_OLDEST, 1000)
            assert [m.value for m in msgs] == [b"v%03d" % i for i in range(N_RECORDS)]
        kill_at += 1
    # 3 segments x 2 object puts (.log, .indexes) + 1 commit: crash points; then a run
    # without a crash
    assert kill_at == 3 * 2 + 1 + 1
