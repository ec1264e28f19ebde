"""Backup and snapshot carry a partition's durable subscriptions (``subscriptions/``):
the copy resumes each one where its acks left it, never past the copy's end offset."""

from __future__ import annotations

import io
from pathlib import Path

from seglog import Message, open_log
from seglog.storage import DataDir, backup, restore, snapshot
from seglog.storage.log.backup import Plan, plan_log
from seglog.storage.log.subscription import SUBSCRIPTIONS_DIR, backup_states


def _subscribed(path: Path, n: int = 10) -> None:
    """A log of ``n`` messages with subscription ``s`` that got all of them and acked all
    but 5, 6, 8 and 9; subscription ``t`` that got nothing yet."""
    with open_log(path, create=True) as log:
        log.publish([Message(value=b"v%d" % i) for i in range(n)])
        with log.subscribe("t"):
            pass
        sub = log.subscribe("s")
        assert [d.offset for d in sub.fetch(n, 0)] == list(range(n))
        assert sub.ack([0, 1, 2, 3, 4, 7]) == 6
        # left open: a backup of a live log reads the journal, not a clean snapshot


def _resumes(path: Path) -> None:
    with open_log(path) as log:
        assert log.subscriptions() == ["s", "t"]
        with log.subscribe("s") as sub:
            assert sub.position == 10
            assert sub.pending() == {5: 0, 6: 0, 8: 0, 9: 0}
            got = sub.fetch(10, 0)  # a restart: the unacked ones are due at once
            assert [(d.offset, d.redelivery_count) for d in got] == [
                (5, 1),
                (6, 1),
                (8, 1),
                (9, 1),
            ]
        with log.subscribe("t") as sub:
            assert sub.position == 0
            assert [d.offset for d in sub.fetch(3, 0)] == [0, 1, 2]


def test_backup_of_a_live_log_keeps_its_subscriptions(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _subscribed(src)
    with open_log(src) as log:
        sub = log.subscribe("s")
        sub.fetch(1, 0)  # redelivers 5 (count 1 in the source only after this)
        report = log.backup(tmp_path / "b")
        assert report.log_end_offsets == {"src": 10}
        sub.ack([5, 6, 8, 9])  # after the backup: the copy does not see these acks
    assert (tmp_path / "b" / SUBSCRIPTIONS_DIR / "s.sub").is_file()
    with open_log(tmp_path / "b") as log, log.subscribe("s") as sub:
        assert sub.position == 10
        assert sub.pending() == {5: 1, 6: 0, 8: 0, 9: 0}


def test_backup_of_a_directory_then_reopen_resumes_at_the_acks(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _subscribed(src)
    backup(src, tmp_path / "b")
    _resumes(tmp_path / "b")


def test_snapshot_restore_resumes_at_the_acks(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _subscribed(src)
    buf = io.BytesIO()
    snapshot(src, buf)
    buf.seek(0)
    restore(buf, tmp_path / "r")
    _resumes(tmp_path / "r")
    restore(snapshot(src, tmp_path / "s.tar").dest, tmp_path / "r2")
    _resumes(tmp_path / "r2")


def test_data_dir_backup_keeps_each_partitions_subscriptions(tmp_path: Path) -> None:
    d = tmp_path / "data"
    with DataDir(d) as dd:
        dd.create_topic("orders", 2)
        for p in range(2):
            log = dd.log("orders", p)
            log.publish([Message(value=b"%d-%d" % (p, i)) for i in range(4)])
            sub = log.subscribe("audit")
            sub.ack([d.offset for d in sub.fetch(p + 1, 0)])
        backup(d, tmp_path / "b")
    with DataDir(tmp_path / "b", create=False) as dd:
        for p in range(2):
            with dd.log("orders", p).subscribe("audit") as sub:
                assert sub.position == p + 1
                assert sub.pending() == {}


def test_a_subscription_never_resumes_past_the_backups_end(tmp_path: Path) -> None:
    """The plan caps each subscription at the end offset it copies: deliveries past it
    (made while the files were planned) are not in the copy, so neither is their state."""
    src = tmp_path / "src"
    _subscribed(src)
    with open_log(src, read_only=True) as log, Plan() as plan:
        plan_log(log, "", plan)
        subs = {i.rel: i.data for i in plan.items if i.rel.startswith(SUBSCRIPTIONS_DIR)}
    assert set(subs) == {"subscriptions/s.sub", "subscriptions/t.sub"}
    # the state of ``s`` as a plan ending at offset 7 holds it, put in a full copy
    capped = dict(backup_states(src, 7))
    assert set(capped) == {"s.sub", "t.sub"}
    backup(src, tmp_path / "b")
    (tmp_path / "b" / SUBSCRIPTIONS_DIR / "s.sub").write_bytes(capped["s.sub"])
    with open_log(tmp_path / "b") as log, log.subscribe("s") as sub:
        assert sub.position == 7  # not 10: offsets 7.. were past that copy's end
        assert sub.pending() == {5: 0, 6: 0}  # 8 and 9 were delivered past it
