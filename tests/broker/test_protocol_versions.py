"""Every advertised version of every API, with requests built by kafka-python's schema
classes over a raw socket: the broker's answers decode and carry the expected data."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterReplicaLogDirsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeGroupsRequest,
    DescribeTransactionsRequest,
    ListConfigResourcesRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from kafka.record.memory_records import MemoryRecords

from seglog.broker.apis.registry import REGISTRY

from ._wire import Wire, api_versions, ensure_topic, produce


def versions(api_key: int) -> list[int]:
    spec = REGISTRY[api_key]
    return list(range(spec.min_version, spec.max_version + 1))


def test_api_versions_advertised(broker: str) -> None:
    advertised = api_versions(broker)
    assert advertised == {k: (s.min_version, s.max_version) for k, s in REGISTRY.items()}
    assert {0, 1, 2, 3, 10, 18, 19, 20, 22} <= set(advertised)


@pytest.mark.parametrize("version", versions(18))
def test_api_versions(broker: str, version: int) -> None:
    with Wire(broker) as w:
        resp = w.call(
            ApiVersionsRequest[version](client_software_name="t", client_software_version="1")
        )
    assert resp.error_code == 0
    assert {k.api_key for k in resp.api_keys} == set(REGISTRY)


@pytest.mark.parametrize("version", versions(3))
def test_metadata(broker: str, topic: str, version: int) -> None:
    with Wire(broker) as w:
        req = MetadataRequest[version](
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=True,
        )
        resp = w.call(req)
        assert [(t.name, t.error_code) for t in resp.topics] == [(topic, 0)]
        assert resp.brokers[0].node_id == 0
        assert len(resp.topics[0].partitions) == 1
        if version >= 10:
            assert resp.topics[0].topic_id.int != 0
        everything = w.call(MetadataRequest[version](topics=None if version else []))
        assert topic in {t.name for t in everything.topics}


@pytest.mark.parametrize("version", versions(0))
def test_produce(broker: str, topic: str, version: int) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        assert produce(w, topic, [b"a", b"b"], version) == 0
        assert produce(w, topic, [b"c"], version) == 2


@pytest.mark.parametrize("version", versions(1))
def test_fetch(broker: str, topic: str, version: int) -> None:
    with Wire(broker) as w:
        topic_id = ensure_topic(w, topic)
        produce(w, topic, [b"x", b"y", b"z"])
        req = FetchRequest[version]
        part = req.FetchTopic.FetchPartition(
            partition=0,
            fetch_offset=1,
            partition_max_bytes=1 << 20,
            current_leader_epoch=-1,
            log_start_offset=-1,
            last_fetched_epoch=-1,
        )
        ftopic = (
            req.FetchTopic(topic_id=topic_id, partitions=[part])
            if version >= 13
            else req.FetchTopic(topic=topic, partitions=[part])
        )
        resp = w.call(
            req(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[ftopic],
                forgotten_topics_data=[],
                rack_id="",
            )
        )
    assert resp.error_code == 0
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, 3, 3)
    if version >= 5:
        assert p.log_start_offset == 0
    if version >= 13:
        assert resp.responses[0].topic_id == topic_id
    values = [r.value for batch in MemoryRecords(p.records) for r in batch]
    assert values == [b"x", b"y", b"z"]  # the whole stored batch, unchanged


@pytest.mark.parametrize("version", versions(2))
def test_list_offsets(broker: str, topic: str, version: int) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"1", b"2", b"3", b"4"])
        req = ListOffsetsRequest[version]
        t = req.ListOffsetsTopic
        resp = w.call(
            req(
                replica_id=-1,
                isolation_level=0,
                timeout_ms=1000,
                topics=[
                    t(
                        name=topic,
                        partitions=[
                            t.ListOffsetsPartition(
                                partition_index=0, timestamp=-1, current_leader_epoch=-1
                            )
                        ],
                    ),
                    t(
                        name=topic,
                        partitions=[
                            t.ListOffsetsPartition(
                                partition_index=0, timestamp=-2, current_leader_epoch=-1
                            )
                        ],
                    ),
                    t(
                        name=topic,
                        partitions=[
                            t.ListOffsetsPartition(
                                partition_index=0, timestamp=0, current_leader_epoch=-1
                            )
                        ],
                    ),
                ],
            )
        )
    got = [(r.partitions[0].error_code, r.partitions[0].offset) for r in resp.topics]
    assert got == [(0, 4), (0, 0), (0, 0)]


@pytest.mark.parametrize("version", versions(8))
def test_offset_commit_then_fetch(broker: str, topic: str, version: int) -> None:
    group = f"group-{topic}"
    with Wire(broker) as w:
        ensure_topic(w, topic)
        req = OffsetCommitRequest[version]
        t = req.OffsetCommitRequestTopic
        resp = w.call(
            req(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                retention_time_ms=-1,
                topics=[
                    t(
                        name=topic,
                        partitions=[
                            t.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=7,
                                committed_leader_epoch=-1,
                                committed_metadata="meta",
                                commit_timestamp=-1,
                            )
                        ],
                    )
                ],
            )
        )
        assert resp.topics[0].partitions[0].error_code == 0
        for fetch_version in (1, 7, 8, 9):
            freq = OffsetFetchRequest[fetch_version]
            if fetch_version >= 8:
                g = freq.OffsetFetchRequestGroup
                fresp = w.call(
                    freq(
                        groups=[
                            g(
                                group_id=group,
                                topics=[
                                    g.OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])
                                ],
                            )
                        ],
                        require_stable=False,
                    )
                )
                parts = fresp.groups[0].topics[0].partitions
            else:
                ft = freq.OffsetFetchRequestTopic
                fresp = w.call(
                    freq(
                        group_id=group,
                        topics=[ft(name=topic, partition_indexes=[0, 1])],
                        require_stable=False,
                    )
                )
                parts = fresp.topics[0].partitions
            assert [(p.partition_index, p.committed_offset) for p in parts] == [(0, 7), (1, -1)]
            assert parts[0].metadata == "meta"


@pytest.mark.parametrize("version", versions(9))
def test_offset_fetch_nothing_committed(broker: str, topic: str, version: int) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        freq = OffsetFetchRequest[version]
        if version >= 8:
            g = freq.OffsetFetchRequestGroup
            resp = w.call(
                freq(
                    groups=[
                        g(
                            group_id="nobody",
                            topics=[g.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
                        )
                    ],
                    require_stable=False,
                )
            )
            part = resp.groups[0].topics[0].partitions[0]
        else:
            ft = freq.OffsetFetchRequestTopic
            resp = w.call(
                freq(
                    group_id="nobody",
                    topics=[ft(name=topic, partition_indexes=[0])],
                    require_stable=False,
                )
            )
            part = resp.topics[0].partitions[0]
    assert (part.committed_offset, part.error_code) == (-1, 0)


@pytest.mark.parametrize("version", versions(10))
def test_find_coordinator(broker: str, version: int) -> None:
    port = int(broker.rsplit(":", 1)[1])
    with Wire(broker) as w:
        req = FindCoordinatorRequest[version]
        if version >= 4:
            resp = w.call(req(key_type=0, coordinator_keys=["g1", "g2"]))
            assert [(c.key, c.node_id, c.port, c.error_code) for c in resp.coordinators] == [
                ("g1", 0, port, 0),
                ("g2", 0, port, 0),
            ]
        else:
            resp = w.call(req(key="g1", key_type=0))
            assert (resp.error_code, resp.node_id, resp.host, resp.port) == (
                0,
                0,
                "127.0.0.1",
                port,
            )


@pytest.mark.parametrize("version", versions(19))
def test_create_and_delete_topics(broker: str, topic: str, version: int) -> None:
    with Wire(broker) as w:
        req = CreateTopicsRequest[version]
        t = req.CreatableTopic
        resp = w.call(
            req(
                topics=[
                    t(
                        name=topic,
                        num_partitions=2,
                        replication_factor=1,
                        assignments=[],
                        configs=[t.CreatableTopicConfig(name="segment.bytes", value="1048576")],
                    ),
                    t(
                        name="..",
                        num_partitions=1,
                        replication_factor=1,
                        assignments=[],
                        configs=[],
                    ),
                    t(
                        name=topic + ".rf3",
                        num_partitions=1,
                        replication_factor=3,
                        assignments=[],
                        configs=[],
                    ),
                ],
                timeout_ms=5000,
                validate_only=False,
            )
        )
        assert [(r.name, r.error_code) for r in resp.topics] == [
            (topic, 0),
            ("..", 17),
            (topic + ".rf3", 38),
        ]
        if version >= 5:
            assert resp.topics[0].num_partitions == 2
        dversion = min(version - 1, REGISTRY[20].max_version) if version < 7 else 6
        dreq = DeleteTopicsRequest[dversion]
        if dversion >= 6:
            dresp = w.call(dreq(topics=[dreq.DeleteTopicState(name=topic)], timeout_ms=5000))
        else:
            dresp = w.call(dreq(topic_names=[topic, "no-such-topic"], timeout_ms=5000))
        codes = [(r.name, r.error_code) for r in dresp.responses]
        assert codes[0] == (topic, 0)
        if dversion < 6:
            assert codes[1] == ("no-such-topic", 3)


@pytest.mark.parametrize("version", versions(22))
def test_init_producer_id(broker: str, version: int) -> None:
    with Wire(broker) as w:
        req = InitProducerIdRequest[version]
        first = w.call(req(transactional_id=None, transaction_timeout_ms=60000))
        second = w.call(req(transactional_id=None, transaction_timeout_ms=60000))
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert second.producer_id > first.producer_id >= 0


@pytest.mark.parametrize("version", versions(15))
def test_describe_groups(broker: str, version: int) -> None:
    with Wire(broker) as w:
        req = DescribeGroupsRequest[version](
            groups=["no-such-group"], include_authorized_operations=False
        )
        (group,) = w.call(req).groups
    assert (group.group_id, group.group_state, group.members) == ("no-such-group", "Dead", [])
    assert group.error_code == (69 if version >= 6 else 0)  # GROUP_ID_NOT_FOUND from v6


@pytest.mark.parametrize("version", versions(45))
def test_alter_partition_reassignments(broker: str, topic: str, version: int) -> None:
    req = AlterPartitionReassignmentsRequest[version]
    part = req.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[0])
    with Wire(broker) as w:
        ensure_topic(w, topic)
        resp = w.call(
            req(timeout_ms=1000, topics=[req.ReassignableTopic(name=topic, partitions=[part])])
        )
    assert resp.error_code == 0
    assert resp.responses[0].partitions[0].error_code == 0


@pytest.mark.parametrize("version", versions(34))
def test_alter_replica_log_dirs(broker: str, topic: str, data_dir: Path, version: int) -> None:
    req = AlterReplicaLogDirsRequest[version]
    dirs = [
        req.AlterReplicaLogDir(
            path=path,
            topics=[req.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=topic, partitions=[0])],
        )
        for path in (str(data_dir.resolve()), "/no/such/dir")
    ]
    with Wire(broker) as w:
        ensure_topic(w, topic)
        same = w.call(req(dirs=dirs[:1]))
        other = w.call(req(dirs=dirs[1:]))
    assert [(t.topic_name, [p.error_code for p in t.partitions]) for t in same.results] == [
        (topic, [0])
    ]
    assert [(t.topic_name, [p.error_code for p in t.partitions]) for t in other.results] == [
        (topic, [57])
    ]


@pytest.mark.parametrize("version", versions(74))
def test_list_config_resources(broker: str, topic: str, version: int) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        resp = w.call(ListConfigResourcesRequest[version](resource_types=[]))
    assert resp.error_code == 0
    listed = [(r.resource_type, r.resource_name) for r in resp.config_resources]
    if version == 0:
        assert listed == []  # client-metrics subscriptions only: none
    else:
        assert listed[0] == (4, "0")
        assert (2, topic) in listed


def _add_partitions(w: Wire, version: int, txn: tuple[str, int, int], topic: str) -> int:
    txn_id, pid, epoch = txn
    req = AddPartitionsToTxnRequest[version]
    if version >= 4:
        t = req.AddPartitionsToTxnTransaction
        resp = w.call(req(transactions=[t(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=False,
            topics=[t.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
        )]))  # fmt: skip
        assert resp.error_code == 0
        results = resp.results_by_transaction[0].topic_results
    else:
        resp = w.call(req(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[req.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
        ))  # fmt: skip
        results = resp.results_by_topic_v3_and_below
    return int(results[0].results_by_partition[0].partition_error_code)


@pytest.mark.parametrize("version", versions(24))
def test_transaction_apis(broker: str, topic: str, version: int) -> None:
    """One transaction per AddPartitionsToTxn version, the other transactional APIs at the
    same version where they have it (else their highest): InitProducerId with a
    transactional id, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, Describe/ListTransactions."""
    txn_id = f"pv-{version}"

    def at(api_key: int) -> int:
        return min(version, REGISTRY[api_key].max_version)

    with Wire(broker) as w:
        ensure_topic(w, topic)
        init = w.call(
            InitProducerIdRequest[at(22)](transactional_id=txn_id, transaction_timeout_ms=60000)
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        assert _add_partitions(w, version, (txn_id, pid, epoch), topic) == 0
        resp = w.call(AddOffsetsToTxnRequest[at(25)](
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id="pv-g"
        ))  # fmt: skip
        assert resp.error_code == 0
        req = TxnOffsetCommitRequest[at(28)]
        part = req.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=version, committed_leader_epoch=-1,
            committed_metadata=None,
        )  # fmt: skip
        resp = w.call(req(
            transactional_id=txn_id, group_id="pv-g", producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[req.TxnOffsetCommitRequestTopic(name=topic, partitions=[part])],
        ))  # fmt: skip
        assert resp.topics[0].partitions[0].error_code == 0
        described = w.call(DescribeTransactionsRequest[0](transactional_ids=[txn_id]))
        assert described.transaction_states[0].transaction_state == "Ongoing"
        lreq = ListTransactionsRequest[at(66)]
        listed = w.call(lreq(state_filters=["Ongoing"], producer_id_filters=[pid]))
        assert [t.transactional_id for t in listed.transaction_states] == [txn_id]
        resp = w.call(EndTxnRequest[at(26)](
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=True
        ))  # fmt: skip
        assert resp.error_code == 0
        fetched = w.call(OffsetFetchRequest[7](group_id="pv-g", topics=None, require_stable=True))
        offsets = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics
                   for p in t.partitions}  # fmt: skip
        assert offsets[(topic, 0)] == version
