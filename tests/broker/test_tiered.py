"""Tiered storage through the broker (KIP-405): a topic with ``remote.storage.enable``
uploads its closed segments to moto's S3 server, local retention removes the local
copies, and Kafka clients read the whole history back (Fetch from offset 0 with
confluent-kafka, ListOffsets -2 / -4 / by time); DescribeLogDirs and /metrics show both
tiers; a stopped store holds local data, counts failures and catches up once back."""

from __future__ import annotations

import pathlib
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.protocol.admin import AlterConfigsRequest, DescribeLogDirsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from moto.server import ThreadedMotoServer
from prometheus_client.parser import text_string_to_metric_families
from tests._s3 import S3Server
from tests._wait import wait_until
from tests.broker._wire import Wire, fetch_request, values

from seglog.broker import BrokerProcess, free_port

N = 3000
TS0 = time.time_ns() // 1_000_000 - 3_600_000  # an hour ago: inside retention.ms


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    yield server
    server.stop()


def _start(
    broker_factory: Callable[..., BrokerProcess], s3: S3Server, *extra: str
) -> tuple[BrokerProcess, str]:
    url = s3.bucket()
    proc = broker_factory([
        "--seglog-remote-storage-url", url,
        "--seglog-remote-storage-endpoint-url", s3.endpoint,
        *extra,
    ])  # fmt: skip
    return proc, url


def _create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "remote.storage.enable": "true",
        "segment.bytes": "16384",
        "local.retention.bytes": "0",
        **configs,
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def _produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096})
    for i in range(start, start + n):
        producer.produce(topic, value=b"m%06d" % i + b"." * 90, timestamp=TS0 + i)
    assert producer.flush(30) == 0


def _list_offset(bootstrap: str, topic: str, timestamp: int) -> int:
    req = ListOffsetsRequest[9](
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    with Wire(bootstrap) as w:
        part = w.call(req).topics[0].partitions[0]
    assert part.error_code == 0
    return int(part.offset)


def _consume_all(bootstrap: str, topic: str, n: int, start: int = 0) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, start)])
    out: list[bytes] = []
    try:

        def more() -> bool:
            msg = consumer.poll(1.0)
            if msg is not None:
                assert msg.error() is None, msg.error()
                assert msg.offset() == start + len(out)
                out.append(msg.value())
            return len(out) >= n

        wait_until(more, timeout=60, interval=0, message="consume the tiered history")
    finally:
        consumer.close()
    return out


def _segments(data: pathlib.Path, topic: str) -> list[str]:
    return sorted(p.name for p in (data / f"{topic}-0").glob("*.log"))


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            if sample.name in (name, name + "_total"):
                return float(sample.value)
    return -1.0


def test_history_is_read_back_from_the_tier(
    broker_factory: Callable[..., BrokerProcess], s3: S3Server, topic: str
) -> None:
    proc, url = _start(broker_factory, s3)
    _create(proc.bootstrap, topic)
    _produce(proc.bootstrap, topic, 0, N)
    # uploaded after each roll, then deleted locally (local.retention.bytes=0)
    local_start = wait_until(
        lambda: _list_offset(proc.bootstrap, topic, -4), timeout=60, message="local deletion"
    )
    assert 0 < local_start < N
    assert not (proc.data_dir / f"{topic}-0" / f"{0:020d}.log").exists()
    assert _list_offset(proc.bootstrap, topic, -2) == 0  # earliest = the remote start
    assert _list_offset(proc.bootstrap, topic, -1) == N
    assert _list_offset(proc.bootstrap, topic, -5) >= local_start - 1  # latest tiered
    assert _list_offset(proc.bootstrap, topic, TS0 + 17) == 17  # by time, in the tier
    values = _consume_all(proc.bootstrap, topic, N)
    assert values == [b"m%06d" % i + b"." * 90 for i in range(N)]
    # the objects are in the bucket, under the partition's prefix
    bucket, prefix = url.removeprefix("s3://").split("/", 1)
    listing = s3.client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{topic}-0-")  # type: ignore[attr-defined]
    keys = {o["Key"].rsplit("/", 1)[1] for o in listing["Contents"]}
    assert "manifest.json" in keys
    assert any(k.endswith(".log") for k in keys)
    # DescribeLogDirs: the local directory and the store, each with this partition's bytes
    with Wire(proc.bootstrap) as w:
        resp = w.call(DescribeLogDirsRequest[1](topics=None))
    dirs = {r.log_dir: r for r in resp.results}
    assert url in dirs
    remote_sizes = {t.name: t.partitions[0].partition_size for t in dirs[url].topics}
    assert remote_sizes[topic] > 0


def test_unreachable_store_holds_local_data_and_catches_up(
    broker_factory: Callable[..., BrokerProcess], tmp_path: pathlib.Path, topic: str
) -> None:
    server = S3Server()
    port = free_port()
    proc, _url = _start(broker_factory, server, "--metrics-listen", f"127.0.0.1:{port}")
    _create(proc.bootstrap, topic)
    _produce(proc.bootstrap, topic, 0, 200)
    local_start = wait_until(lambda: _list_offset(proc.bootstrap, topic, -4), timeout=60)
    host, s3_port = server.endpoint.removeprefix("http://").split(":")
    server.stop()
    before = len(_segments(proc.data_dir, topic))
    _produce(proc.bootstrap, topic, 200, 800)
    wait_until(lambda: _metric(port, "seglog_upload_failures") >= 2, timeout=60)
    assert _metric(port, "seglog_upload_lag_segments") > 0
    held = len(_segments(proc.data_dir, topic))
    assert held > before  # rolled segments stay while the store is down
    # what is local is still served (the uploaded history waits for the store)
    tail = _consume_all(proc.bootstrap, topic, 1000 - local_start, start=local_start)
    assert tail[-1].startswith(b"m000999")
    # the store comes back (moto keeps its buckets in-process): uploads resume, local
    # copies go, and the history is still whole
    again = ThreadedMotoServer(ip_address=host, port=int(s3_port), verbose=False)
    again.start()
    try:
        wait_until(lambda: _metric(port, "seglog_upload_lag_segments") == 0, timeout=90)
        wait_until(lambda: len(_segments(proc.data_dir, topic)) < held, timeout=60)
        values = _consume_all(proc.bootstrap, topic, 1000)
        assert values == [b"m%06d" % i + b"." * 90 for i in range(1000)]
        assert _metric(port, "seglog_cache_misses") > 0
        assert _metric(port, "seglog_remote_bytes") > 0
    finally:
        again.stop()


def test_corrupt_remote_object_is_never_served_by_fetch(
    broker_factory: Callable[..., BrokerProcess], tmp_path: pathlib.Path, topic: str
) -> None:
    """A bit flip in a tiered segment's object: Fetch answers CORRUPT_MESSAGE (2) for it,
    never its bytes; intact offsets are still served and the broker stays up."""
    tier = tmp_path / "tier"
    proc = broker_factory(["--seglog-remote-storage-url", f"file://{tier}"])
    _create(proc.bootstrap, topic)
    _produce(proc.bootstrap, topic, 0, N)
    local_start = wait_until(lambda: _list_offset(proc.bootstrap, topic, -4), timeout=60)
    logs = sorted(tier.rglob("0000000000000000000*.log"))
    assert logs, sorted(tier.rglob("*"))
    data = bytearray(logs[0].read_bytes())
    data[-5] ^= 0x01
    logs[0].write_bytes(bytes(data))
    with Wire(proc.bootstrap) as w:
        bad = w.call(fetch_request(topic, {0: 0})).responses[0].partitions[0]
        assert bad.error_code == 2  # CORRUPT_MESSAGE
        assert not bad.records
        good = w.call(fetch_request(topic, {0: local_start})).responses[0].partitions[0]
        assert good.error_code == 0
        assert values(good.records)[0] == b"m%06d" % local_start + b"." * 90
    assert _list_offset(proc.bootstrap, topic, -2) == 0
    assert proc.process.poll() is None


def test_remote_storage_enable_follows_kafkas_rules(
    broker_factory: Callable[..., BrokerProcess], tmp_path: pathlib.Path, topic: str
) -> None:
    """INVALID_CONFIG (40) for remote.storage.enable=true on a broker without a store, and
    for turning it off on a tiered topic; AlterConfigs turning it on tiers the topic."""
    plain = broker_factory([], data=tmp_path / "plain")
    admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    new = NewTopic(topic, 1, 1, config={"remote.storage.enable": "true"})
    with pytest.raises(KafkaException) as info:
        admin.create_topics([new])[topic].result(30)
    assert info.value.args[0].code() == 40
    tiered = broker_factory(["--seglog-remote-storage-url", f"file://{tmp_path / 'tier'}"])
    admin = AdminClient({"bootstrap.servers": tiered.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "16384"})])[topic].result(
        30
    )
    _produce(tiered.bootstrap, topic, 0, 500)

    def alter(value: str) -> object:
        res = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(
                    "remote.storage.enable", value, incremental_operation=AlterConfigOpType.SET
                ),
                ConfigEntry(
                    "local.retention.bytes", "0", incremental_operation=AlterConfigOpType.SET
                ),
            ],
        )
        return admin.incremental_alter_configs([res])[res]

    alter("true").result(10)  # type: ignore[attr-defined]
    wait_until(lambda: _list_offset(tiered.bootstrap, topic, -4) > 0, timeout=60)
    assert _list_offset(tiered.bootstrap, topic, -2) == 0
    with pytest.raises(KafkaException) as info:
        alter("false").result(10)  # type: ignore[attr-defined]
    assert info.value.args[0].code() == 40


_TIERED_COMPACT = "Remote log storage is unsupported for the compacted topics"


def _refused(future: object) -> str:
    """The error message of a request refused with 40 INVALID_CONFIG."""
    with pytest.raises(KafkaException) as info:
        future.result(30)  # type: ignore[attr-defined]
    error = info.value.args[0]
    assert error.code() == 40, error
    return str(error.str())


def _legacy_alter(bootstrap: str, topic: str, configs: dict[str, str]) -> tuple[int, str]:
    """AlterConfigs v1 (the legacy replace), which no admin client of ours still sends."""
    res = AlterConfigsRequest[1].AlterConfigsResource
    req = AlterConfigsRequest[1](
        resources=[
            res(
                resource_type=2,
                resource_name=topic,
                configs=[res.AlterableConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        validate_only=False,
    )
    with Wire(bootstrap) as w:
        out = w.call(req).responses[0]
    return int(out.error_code), str(out.error_message)


def test_compact_beside_remote_storage_is_refused_as_kafka_does(
    broker_factory: Callable[..., BrokerProcess], tmp_path: pathlib.Path, topic: str
) -> None:
    """Kafka's rule (LogConfig): 40 INVALID_CONFIG with Kafka's message for
    remote.storage.enable=true beside a cleanup.policy containing compact, at CreateTopics,
    IncrementalAlterConfigs (SET, APPEND; either config turned on) and AlterConfigs, and
    through the broker's log.cleanup.policy=compact for a topic naming no cleanup.policy.
    Nothing is created or changed; the broker stays up."""
    tier = ["--seglog-remote-storage-url", f"file://{tmp_path / 'tier'}"]
    proc = broker_factory(tier)
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    both = {"remote.storage.enable": "true", "cleanup.policy": "delete,compact"}
    bad = NewTopic(topic, 1, 1, config=both)
    assert _TIERED_COMPACT in _refused(admin.create_topics([bad])[topic])
    assert topic not in admin.list_topics(timeout=10).topics
    tiered = NewTopic(topic, 1, 1, config={"remote.storage.enable": "true"})
    compacted = NewTopic(f"{topic}.c", 1, 1, config={"cleanup.policy": "compact"})
    for fut in admin.create_topics([tiered, compacted]).values():
        fut.result(30)

    def incremental(name: str, key: str, value: str, op: AlterConfigOpType) -> object:
        entry = ConfigEntry(key, value, incremental_operation=op)
        res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
        return admin.incremental_alter_configs([res])[res]

    for op in (AlterConfigOpType.SET, AlterConfigOpType.APPEND):
        assert _TIERED_COMPACT in _refused(incremental(topic, "cleanup.policy", "compact", op))
    on = incremental(f"{topic}.c", "remote.storage.enable", "true", AlterConfigOpType.SET)
    assert _TIERED_COMPACT in _refused(on)
    code, message = _legacy_alter(proc.bootstrap, topic, both)
    assert (code, _TIERED_COMPACT in message) == (40, True)
    described = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([described])[described].result(10)
    assert (entries["cleanup.policy"].value, entries["remote.storage.enable"].value) == (
        "delete",
        "true",
    )
    # the broker-wide default counts where the topic names no cleanup.policy
    proc2 = broker_factory([*tier, "--log-cleanup-policy", "compact"], data=tmp_path / "d2")
    admin2 = AdminClient({"bootstrap.servers": proc2.bootstrap})
    assert _TIERED_COMPACT in _refused(admin2.create_topics([tiered])[topic])
    deleting = NewTopic(
        topic, 1, 1, config={"remote.storage.enable": "true", "cleanup.policy": "delete"}
    )
    admin2.create_topics([deleting])[topic].result(30)
    assert proc.process.poll() is None
    assert proc2.process.poll() is None
