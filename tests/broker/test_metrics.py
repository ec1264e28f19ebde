"""``seglog serve --metrics-listen``: /metrics parsed with prometheus-client's parser after
known traffic; counters equal what was sent. ``--log-format json`` lines parse as JSON."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from tests._wait import wait_until
from tests.broker._share import create_topic, earliest, heartbeat, produce, share_fetch

from seglog.broker import BrokerProcess, free_port

from ._txn import add, end, init, send, txn_batch
from ._wire import Wire, ensure_topic

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _tp(topic: str, partition: int = 0) -> tuple[tuple[str, str], ...]:
    return (("partition", str(partition)), ("topic", topic))


def test_counters_equal_the_traffic(broker_factory: Callable[..., BrokerProcess]) -> None:
    port = free_port()
    proc = broker_factory(["--metrics-listen", f"127.0.0.1:{port}", "--log-format", "json"])
    topic, group = "metered", "metered-g"
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(10)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5})
    n, size = 300, 100
    for i in range(n):
        producer.produce(topic, value=bytes([i % 256]) * size, partition=i % 2)
    assert producer.flush(10) == 0

    consumer = Consumer(
        {"bootstrap.servers": proc.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while got < n // 2:
        msg = consumer.poll(10)
        assert msg is not None
        assert msg.error() is None
        got += 1
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 100), TopicPartition(topic, 1, 40)], asynchronous=False
    )
    consumer.close()

    m = _scrape(port)
    for p in (0, 1):
        assert m[("seglog_partition_messages_in_total", _tp(topic, p))] == n // 2
        assert m[("seglog_partition_bytes_in_total", _tp(topic, p))] >= (n // 2) * size
        assert m[("seglog_log_end_offset", _tp(topic, p))] == n // 2
        assert m[("seglog_high_watermark", _tp(topic, p))] == n // 2
        assert m[("seglog_log_start_offset", _tp(topic, p))] == 0
        assert m[("seglog_log_segments", _tp(topic, p))] == 1
        assert (
            m[("seglog_log_size_bytes", _tp(topic, p))]
            == m[("seglog_partition_bytes_in_total", _tp(topic, p))]
        )
    # the consumer read all of partition 0 (fetches may overlap; never fewer records)
    assert m[("seglog_partition_messages_out_total", _tp(topic, 0))] >= n // 2
    assert ("seglog_partition_messages_out_total", _tp(topic, 1)) not in m
    lag = (("group", group), *_tp(topic, 0))
    assert m[("seglog_consumer_group_lag", lag)] == 150 - 100
    assert m[("seglog_consumer_group_lag", (("group", group), *_tp(topic, 1)))] == 150 - 40
    produce = (("api", "Produce"),)
    assert m[("seglog_requests_total", produce)] >= 1
    assert (
        m[("seglog_request_duration_seconds_count", produce)]
        == m[("seglog_requests_total", produce)]
    )
    # default durability: every acknowledged produce was fsynced by a group-commit round
    rounds = m[("seglog_fsync_duration_seconds_count", ())]
    assert rounds >= 1
    assert m[("seglog_group_commit_records_sum", ())] >= n
    assert m[("seglog_storage_appends_total", _tp(topic, 0))] >= 1
    assert m[("seglog_storage_appended_records_total", _tp(topic, 0))] == n // 2
    assert m[("seglog_storage_reads_total", _tp(topic, 0))] >= 1  # the consumer's fetches
    assert m[("seglog_storage_read_bytes_total", _tp(topic, 0))] >= (n // 2) * size
    assert m[("seglog_storage_reads_total", _tp(topic, 1))] == 0  # nobody read partition 1
    assert m[("process_resident_memory_bytes", ())] > 10_000_000
    assert m[("seglog_connections", (("listener", "PLAINTEXT"),))] >= 1

    assert proc.stop() == 0
    lines = [line for line in proc.log_text().splitlines() if line.startswith("{")]
    assert lines
    docs = [json.loads(line) for line in lines]
    assert {"ts", "level", "logger", "msg"} <= set(docs[0])
    assert any("metrics on http://127.0.0.1" in d["msg"] for d in docs)


def test_scrape_during_a_long_poll(broker_factory: Callable[..., BrokerProcess]) -> None:
    port = free_port()
    proc = broker_factory(["--metrics-listen", f"127.0.0.1:{port}"])
    producer = Producer({"bootstrap.servers": proc.bootstrap})
    producer.produce("waiting", value=b"x")
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": proc.bootstrap, "group.id": "w", "fetch.wait.max.ms": 5000}
    )
    consumer.assign([TopicPartition("waiting", 0, 1)])  # at the end: the fetch parks
    try:
        consumer.poll(1)
        waiting = 0.0
        for _ in range(50):
            waiting = _scrape(port)[("seglog_fetches_waiting", ())]
            if waiting:
                break
            consumer.poll(0.1)
        assert waiting >= 1
    finally:
        consumer.close()


def test_storage_syncs_count_the_fsync_rounds(broker_factory: Callable[..., BrokerProcess]) -> None:
    """``seglog_storage_syncs_total`` of a partition counts its group-commit fsync rounds:
    every acks=all produce waited for one, and over all partitions they are the rounds the
    ``seglog_fsync_duration_seconds`` histogram timed."""
    port = free_port()
    proc = broker_factory(["--metrics-listen", f"127.0.0.1:{port}"])
    topic, n = "synced", 10
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all"})
    for i in range(n):  # one at a time: each acknowledged only after its own fsync round
        producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(10) == 0

    def syncs(m: Samples) -> tuple[float, float]:
        per_partition = sum(v for (name, _), v in m.items() if name == "seglog_storage_syncs_total")
        return per_partition, m[("seglog_fsync_duration_seconds_count", ())]

    # a round is counted before its produce is answered and timed just after: poll
    deadline = time.monotonic() + 10
    m = _scrape(port)
    while syncs(m)[0] != syncs(m)[1] and time.monotonic() < deadline:
        time.sleep(0.05)
        m = _scrape(port)
    assert m[("seglog_storage_syncs_total", _tp(topic))] >= n
    assert m[("seglog_storage_appends_total", _tp(topic))] == n
    total, timed = syncs(m)
    assert total == timed


def test_share_group_metrics(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Per share partition: records in flight, acquired, acknowledged by type, archived
    after the delivery count limit (2 here)."""
    port = free_port()
    proc = broker_factory(
        ["--metrics-listen", f"127.0.0.1:{port}", "--group-share-delivery-count-limit", "2"]
    )
    topic, group = "shared", "metered-share"
    create_topic(proc.bootstrap, topic)
    earliest(proc.bootstrap, group)
    produce(proc.bootstrap, topic, 3)  # one batch: offsets 0-2
    labels = (("group", group), *_tp(topic))
    with Wire(proc.bootstrap) as w:
        tid = ensure_topic(w, topic)
        heartbeat(w, group, "a", 0, [topic])
        first = share_fetch(w, group, "a", 0, tid).responses[0].partitions[0]
        assert [(r.first_offset, r.last_offset) for r in first.acquired_records] == [(0, 2)]
        m = _scrape(port)
        assert m[("seglog_share_records_in_flight", labels)] == 3
        assert m[("seglog_share_records_acquired_total", labels)] == 3
        # accept 0, release 1, reject 2; then 1 comes back (count 2) and is released again
        acks = [(0, 0, [1]), (1, 1, [2]), (2, 2, [3])]
        again = share_fetch(w, group, "a", 1, tid, acks=acks).responses[0].partitions[0]
        assert [(r.first_offset, r.delivery_count) for r in again.acquired_records] == [(1, 2)]
        share_fetch(w, group, "a", 2, tid, acks=[(1, 1, [2])], max_wait_ms=200)
        m = _scrape(port)
    ack = "seglog_share_acknowledgements_total"
    assert m[("seglog_share_records_in_flight", labels)] == 0
    assert m[("seglog_share_records_acquired_total", labels)] == 4
    assert m[(ack, (*labels[:2], ("topic", topic), ("type", "accept")))] == 1
    assert m[(ack, (*labels[:2], ("topic", topic), ("type", "release")))] == 2
    assert m[(ack, (*labels[:2], ("topic", topic), ("type", "reject")))] == 1
    assert m[("seglog_share_records_archived_total", labels)] == 1  # 1: its third delivery


def test_transaction_metrics(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Commits, aborts, timeouts and ongoing transactions are counted; the LSO lag is the
    records an open transaction holds back."""
    port = free_port()
    proc = broker_factory([
        "--metrics-listen", f"127.0.0.1:{port}",
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms", "100",
    ])  # fmt: skip
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, "txm")
        r = init(w, "txm-1")
        pid, epoch = r.producer_id, r.producer_epoch
        for commit in (True, False):
            assert add(w, "txm-1", pid, epoch, "txm") == 0
            assert end(w, "txm-1", pid, epoch, commit) == 0
        assert add(w, "txm-1", pid, epoch, "txm") == 0
        assert send(w, "txm", txn_batch(pid, epoch, 0, [b"a", b"b", b"c"])) == 0
        samples = _scrape(port)
        assert samples[("seglog_transactions_commits_total", ())] == 1
        assert samples[("seglog_transactions_aborts_total", ())] == 1
        assert samples[("seglog_transactions_ongoing", ())] == 1
        # produce answers transactional records before their fsync; the lag counts them
        # once they are durable (the high watermark follows the fsync)
        wait_until(
            lambda: _scrape(port)[("seglog_last_stable_offset_lag", _tp("txm"))] == 3,
            timeout=20,
            message="the open transaction's 3 records are not the LSO lag",
        )
        hung = init(w, "txm-2", timeout_ms=200)
        assert add(w, "txm-2", hung.producer_id, hung.producer_epoch, "txm") == 0
    wait_until(
        lambda: _scrape(port)[("seglog_transactions_timeouts_total", ())] == 1,
        timeout=20,
        message="the hung transaction was not aborted",
    )
