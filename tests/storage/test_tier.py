"""Tiered storage in the embedded API (KIP-405 semantics): uploads after a roll, local
deletion only after a committed upload and past local retention, transparent reads of
remote segments (read, consume, get, offset_by_time, batches), whole-log retention on the
tier, orphans of an interrupted upload, a corrupt remote object never served, an
unreachable store holding local data. Against a ``file://`` tier and moto's S3 server."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import crc32c
import pytest
from tests._s3 import S3Server
from tests._wait import wait_until

from seglog.errors import InvalidOffsetError
from seglog.storage import (
    OFFSET_OLDEST,
    DataDir,
    Log,
    LogConfig,
    Message,
    RemoteCorruptionError,
    RemoteStorage,
    RemoteTier,
    check_tiered_cleanup_policy,
    compact,
    start_tiering,
    tier_sync,
)

N_SEGMENTS = 6
PER_SEGMENT = 20


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    yield server
    server.stop()


@pytest.fixture(params=["file", "s3"])
def remote(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> RemoteStorage:
    cache = str(tmp_path / "cache")
    if request.param == "file":
        return RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=cache)
    s3: S3Server = request.getfixturevalue("s3")
    return RemoteStorage(s3.bucket(), endpoint_url=s3.endpoint, cache_dir=cache)


def _config(**extra: int) -> LogConfig:
    return LogConfig(
        segment_messages=PER_SEGMENT,
        remote_storage_enable=True,
        local_retention_bytes=extra.get("local_retention_bytes", 0),
        local_retention_ms=extra.get("local_retention_ms", -1),
    )


def _fill(log: Log, n: int, *, ts0: int = 1_000_000) -> None:
    for i in range(n):
        log.publish([Message(key=b"k%d" % i, value=b"v%05d" % i, timestamp=ts0 + i * 1000)])


def _tiered(path: pathlib.Path, remote: RemoteStorage, **extra: int) -> Log:
    log = Log.open(path, _config(**extra), create=True, remote=remote)
    _fill(log, N_SEGMENTS * PER_SEGMENT + 5)
    log.sync()
    return log


def test_upload_then_local_delete_then_transparent_reads(
    tmp_path: pathlib.Path, remote: RemoteStorage
) -> None:
    with _tiered(tmp_path / "t-0", remote) as log:
        report = tier_sync(log)
        assert report.error is None
        assert report.uploaded == tuple(range(0, N_SEGMENTS * PER_SEGMENT, PER_SEGMENT))
        # local.retention.bytes=0: every uploaded segment left the local disk, not the log
        assert report.deleted_local == report.uploaded
        assert [s.base_offset for s in log.segments()] == [N_SEGMENTS * PER_SEGMENT]
        assert not (tmp_path / "t-0" / f"{0:020d}.log").exists()
        assert log.log_start_offset == 0
        assert log.local_log_start_offset == N_SEGMENTS * PER_SEGMENT
        stat = log.stat()
        assert stat["remote_segments"] == N_SEGMENTS
        assert stat["remote_bytes"] > 0
        # every read path serves the remote offsets
        _, msgs = log.consume(OFFSET_OLDEST, 1000)
        assert [m.offset for m in msgs] == list(range(N_SEGMENTS * PER_SEGMENT + 5))
        assert [m.value for m in msgs[:3]] == [b"v00000", b"v00001", b"v00002"]
        assert log.get(37).value == b"v00037"
        assert log.offset_by_time(1_000_000 + 45_000)[0] == 45
        assert log.offset_for_time(0) == (0, 1_000_000)
        data = log.read(21, 1 << 20)
        assert data
        assert int.from_bytes(data[:8], "big") == 21
        assert sum(1 for _ in log.batches(0)) == N_SEGMENTS * PER_SEGMENT + 5
    # a reopen (and a read-only one, as Spark's path mode does) finds the tier by itself
    with Log.open(tmp_path / "t-0", read_only=True) as ro:
        assert ro.log_start_offset == 0
        assert ro.get(3).value == b"v00003"
    with Log.open(tmp_path / "t-0", _config(), remote=remote) as again:
        assert again.get(99).value == b"v00099"
        assert tier_sync(again).uploaded == ()


def test_local_copies_stay_until_uploaded_and_past_local_retention(
    tmp_path: pathlib.Path, remote: RemoteStorage
) -> None:
    with _tiered(tmp_path / "t-0", remote, local_retention_bytes=-1) as log:
        report = tier_sync(log)
        assert len(report.uploaded) == N_SEGMENTS
        assert report.deleted_local == ()
        assert len(log.segments()) == N_SEGMENTS + 1
    # local retention by time: only segments whose newest record is older go
    with Log.open(
        tmp_path / "t-0", _config(local_retention_bytes=-1, local_retention_ms=50_000),
        remote=remote,
    ) as log:  # fmt: skip
        now = 1_000_000 + 100_000
        assert tier_sync(log, now_ms=now).deleted_local == (0, 20)
        assert log.local_log_start_offset == 40
        assert log.log_start_offset == 0


def test_unreachable_store_keeps_local_data_and_retries(tmp_path: pathlib.Path) -> None:
    server = S3Server()
    remote = RemoteStorage(server.bucket(), endpoint_url=server.endpoint, cache_dir=str(tmp_path))
    try:
        with _tiered(tmp_path / "t-0", remote) as log:
            server.stop()
            first = tier_sync(log)
            assert first.error is not None
            assert first.uploaded == ()
            assert first.deleted_local == ()
            assert first.lag_segments == N_SEGMENTS
            assert first.lag_bytes > 0
            tier = log.remote_tier
            assert tier is not None
            assert tier.counters.upload_failures == 1
            assert tier.backoff_s > 0
            assert not tier.reachable
            # within the backoff nothing is tried; forced, it fails again and backs off more
            assert tier_sync(log).error is None
            assert tier.counters.upload_failures == 1
            backoff = tier.backoff_s
            assert tier_sync(log, force=True).error is not None
            assert tier.counters.upload_failures == 2
            assert tier.backoff_s == 2 * backoff
            assert len(log.segments()) == N_SEGMENTS + 1  # nothing local deleted
            assert log.get(0).value == b"v00000"
    finally:
        server.stop()


def test_orphans_of_an_interrupted_upload_are_deleted(
    tmp_path: pathlib.Path, remote: RemoteStorage
) -> None:
    with _tiered(tmp_path / "t-0", remote, local_retention_bytes=-1) as log:
        tier = log.remote_tier
        assert tier is not None
        tier_sync(log)
        # an upload that put its objects and died before the manifest commit
        tier.store.put(f"{tier.partition}/{0:020d}-deadbeef.log", b"half")
        committed = tier.manifest
    with Log.open(tmp_path / "t-0", _config(local_retention_bytes=-1), remote=remote) as log:
        tier = log.remote_tier
        assert tier is not None
        assert tier.counters.orphans_deleted == 1
        keys = {k for k, _ in tier.store.list_objects(f"{tier.partition}/")}
        assert keys == committed.keys() | {f"{tier.partition}/manifest.json"}
        assert tier.manifest == committed


def test_corrupt_remote_object_is_never_served(tmp_path: pathlib.Path) -> None:
    remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))
    with _tiered(tmp_path / "t-0", remote) as log:
        tier_sync(log)
        tier = log.remote_tier
        assert tier is not None
        key = tier.manifest.segments[1].objects["log"].key
        obj = tmp_path / "tier" / key
        data = bytearray(obj.read_bytes())
        data[-3] ^= 0x40  # a bit flip in the last record's value
        obj.write_bytes(bytes(data))
        with pytest.raises(RemoteCorruptionError, match="CRC-32C"):
            log.get(25)
        with pytest.raises(RemoteCorruptionError):
            log.read(21, 1 << 20)
        assert log.get(5).value == b"v00005"  # the intact segment still serves
        assert tier.cache.stats.corrupt >= 2


def test_corrupt_batch_with_a_matching_manifest_is_caught_per_batch(
    tmp_path: pathlib.Path,
) -> None:
    """Even when the whole-object CRC is rewritten to match, the per-batch CRC-32C fails."""
    remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))
    with _tiered(tmp_path / "t-0", remote) as log:
        tier_sync(log)
        tier = log.remote_tier
        assert tier is not None
        entry = tier.manifest.segments[0]
        obj = tmp_path / "tier" / entry.objects["log"].key
        data = bytearray(obj.read_bytes())
        data[-3] ^= 0x40
        obj.write_bytes(bytes(data))
        doc = json.loads(tier.manifest.to_json())
        doc["segments"][0]["objects"]["log"]["crc32c"] = crc32c.crc32c(bytes(data))
        (tmp_path / "tier" / tier.partition / "manifest.json").write_text(json.dumps(doc))
    with (
        Log.open(tmp_path / "t-0", read_only=True) as ro,
        pytest.raises(RemoteCorruptionError, match=r"CRC|invalid"),
    ):
        ro.get(3)


def test_whole_log_retention_deletes_remote_segments(
    tmp_path: pathlib.Path, remote: RemoteStorage
) -> None:
    with _tiered(tmp_path / "t-0", remote) as log:
        tier_sync(log)
        tier = log.remote_tier
        assert tier is not None
        # retention.ms: records up to offset 59 are older than the limit
        now = 1_000_000 + 60_000 + 10_000
        report = tier_sync(log, retention_ms=10_000, now_ms=now)
        assert report.deleted_remote == (0, 20, 40)
        assert log.log_start_offset == 60
        assert [s.base_offset for s in tier.manifest.segments] == [60, 80, 100]
        keys = {k for k, _ in tier.store.list_objects(f"{tier.partition}/")}
        assert keys == tier.manifest.keys() | {f"{tier.partition}/manifest.json"}
        with pytest.raises(InvalidOffsetError):
            log.get(10)
        assert log.get(60).value == b"v00060"
        # retention.bytes: keeps at least that many bytes (whole segments)
        seg_bytes = tier.manifest.segments[0].size
        tier_sync(log, retention_bytes=2 * seg_bytes)
        assert log.log_start_offset == 80  # 80, 100 and the active segment: >= 2 segments


def test_tier_survives_a_store_outage_at_open(tmp_path: pathlib.Path) -> None:
    """The local manifest copy lets a log open (and serve what is local) while the store
    is down; the store's manifest is the authority once it answers."""
    server = S3Server()
    remote = RemoteStorage(server.bucket(), endpoint_url=server.endpoint, cache_dir=str(tmp_path))
    with _tiered(tmp_path / "t-0", remote, local_retention_bytes=-1) as log:
        tier_sync(log)
    server.stop()
    with Log.open(tmp_path / "t-0", _config(local_retention_bytes=-1), remote=remote) as log:
        tier = log.remote_tier
        assert isinstance(tier, RemoteTier)
        assert not tier.reachable
        assert len(tier.manifest.segments) == N_SEGMENTS
        assert log.get(0).value == b"v00000"  # local copy


def test_a_reader_beside_the_writer_follows_the_tier(
    tmp_path: pathlib.Path, remote: RemoteStorage
) -> None:
    """A read-only log opened before the writer tiered (Spark's path mode beside a broker)
    finds the tier, and the segments uploaded since, on its next reads."""
    path = tmp_path / "t-0"
    with Log.open(path, _config(), create=True, remote=remote) as writer:
        _fill(writer, 50)
        writer.sync()
        with Log.open(path, read_only=True) as reader:
            assert reader.remote_tier is None
            tier_sync(writer)  # 2 segments uploaded, their local copies deleted
            _fill(writer, N_SEGMENTS * PER_SEGMENT, ts0=2_000_000)
            writer.sync()
            tier_sync(writer)
            reader.refresh()
            assert reader.remote_tier is not None
            _, msgs = reader.consume(OFFSET_OLDEST, 10_000)
            assert [m.offset for m in msgs] == list(range(50 + N_SEGMENTS * PER_SEGMENT))


def test_txnindex_and_snapshot_files_are_uploaded_with_their_segment(
    tmp_path: pathlib.Path,
) -> None:
    remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))
    path = tmp_path / "t-0"
    with Log.open(path, _config(local_retention_bytes=-1), create=True, remote=remote) as log:
        _fill(log, 45)
        (path / f"{20:020d}.txnindex").write_bytes(b"aborted-txn-entries")
        (path / f"{0:020d}.snapshot").write_bytes(b"producer-state")
        tier_sync(log)
        tier = log.remote_tier
        assert tier is not None
        first, second = tier.manifest.segments
        assert set(first.objects) == {"log", "index", "timeindex", "snapshot"}
        assert set(second.objects) == {"log", "index", "timeindex", "txnindex"}
        txn = second.objects["txnindex"]  # in the segment's .indexes object, after the others
        assert txn.key == second.objects["index"].key
        blob = (tmp_path / "tier" / txn.key).read_bytes()
        assert blob[txn.offset : txn.offset + txn.size] == b"aborted-txn-entries"
        assert log.get(3).value == b"v00003"


def test_a_topic_created_again_never_meets_the_old_topics_objects(
    tmp_path: pathlib.Path,
) -> None:
    remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))
    configs = {
        "remote.storage.enable": "true",
        "local.retention.bytes": "0",
        "seglog.segment.messages": str(PER_SEGMENT),
    }
    with DataDir(tmp_path / "data", remote=remote) as data_dir:
        data_dir.create_topic("events", 1, configs)
        old = data_dir.log("events", 0)
        _fill(old, 50)
        assert tier_sync(old).uploaded == (0, 20)
        data_dir.delete_topic("events")
        data_dir.create_topic("events", 1, configs)
        new = data_dir.log("events", 0)
        tier = new.remote_tier
        assert tier is not None
        assert tier.manifest.segments == ()
        assert (new.log_start_offset, new.log_end_offset) == (0, 0)
        new.publish([Message(value=b"fresh")])
        assert new.get(0).value == b"fresh"


def test_start_tiering_uploads_after_rolls_by_itself(tmp_path: pathlib.Path) -> None:
    remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))
    with Log.open(tmp_path / "t-0", _config(), create=True, remote=remote) as log:
        stop = start_tiering(log, every_s=0.05)
        try:
            _fill(log, 65)
            tier = log.remote_tier
            assert tier is not None
            wait_until(lambda: len(tier.manifest.segments) == 3, timeout=30)
            wait_until(lambda: log.local_log_start_offset == 60, timeout=30)
            assert log.get(5).value == b"v00005"
        finally:
            stop()


@pytest.mark.parametrize(
    ("configs", "default", "refused"),
    [
        ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, "delete", True),
        ({"remote.storage.enable": "true", "cleanup.policy": "delete, Compact"}, "delete", True),
        ({"remote.storage.enable": "true"}, "compact,delete", True),
        ({"remote.storage.enable": "TRUE", "cleanup.policy": None}, "compact", True),
        ({"remote.storage.enable": "true", "cleanup.policy": "delete"}, "compact", False),
        ({"remote.storage.enable": "true"}, "delete", False),
        ({"remote.storage.enable": "false", "cleanup.policy": "compact"}, "delete", False),
        ({"cleanup.policy": "compact"}, "compact", False),
    ],
)
def test_compact_beside_remote_storage_is_refused_as_kafka_does(
    configs: dict[str, str | None], default: str, refused: bool
) -> None:
    """Kafka's LogConfig rule: remote.storage.enable=true never with a cleanup.policy
    (the topic's, else the broker default's) containing compact."""
    if refused:
        with pytest.raises(ValueError, match="Remote log storage is unsupported for the compacted"):
            check_tiered_cleanup_policy(configs, default)
    else:
        check_tiered_cleanup_policy(configs, default)


def test_data_dir_refuses_a_compacted_tiered_topic(tmp_path: pathlib.Path) -> None:
    """create_topic and alter_topic_configs refuse the pair with ValueError and store
    nothing: no partition directory, the old configs stay."""
    remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))
    tiered_compact = {"remote.storage.enable": "true", "cleanup.policy": "compact,delete"}
    with DataDir(tmp_path / "data", remote=remote) as data_dir:
        with pytest.raises(ValueError, match="unsupported for the compacted topics"):
            data_dir.create_topic("events", 1, tiered_compact)
        assert "events" not in data_dir.topics()
        assert not (tmp_path / "data" / "events-0").exists()
        data_dir.create_topic("events", 1, {"remote.storage.enable": "true"})
        with pytest.raises(ValueError, match="unsupported for the compacted topics"):
            data_dir.alter_topic_configs("events", tiered_compact)
        assert data_dir.topic("events").configs == {"remote.storage.enable": "true"}
        data_dir.create_topic("plain", 1, {"cleanup.policy": "compact"})
        with pytest.raises(ValueError, match="unsupported for the compacted topics"):
            data_dir.alter_topic_configs(
                "plain", {"cleanup.policy": "compact", "remote.storage.enable": "true"}
            )
    with DataDir(tmp_path / "data", remote=remote) as data_dir:
        assert data_dir.topic("plain").configs == {"cleanup.policy": "compact"}


def test_compact_refuses_a_tiered_log_and_changes_nothing(
    tmp_path: pathlib.Path, remote: RemoteStorage
) -> None:
    """``seglog.storage.compact`` on a tiered log raises ValueError naming the rule; the
    superseded records (every key written twice) stay readable."""
    with Log.open(
        tmp_path / "t-0", _config(local_retention_bytes=-2), create=True, remote=remote
    ) as log:
        _fill(log, 2 * PER_SEGMENT)
        _fill(log, 2 * PER_SEGMENT)
        log.sync()
        with pytest.raises(ValueError, match="unsupported for the compacted topics"):
            compact(log)
        _, msgs = log.consume(OFFSET_OLDEST, 1000)
        assert [m.offset for m in msgs] == list(range(4 * PER_SEGMENT))
