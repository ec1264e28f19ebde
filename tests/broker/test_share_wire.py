"""KIP-932 at the wire: the share-group schemas round-trip at every served version,
ApiVersions advertises them, and bad input gets Kafka's error codes (unknown member,
fenced epoch, share-session epochs, acknowledging records not acquired or acquired by
another member); ShareGroupDescribe and Describe/Alter/DeleteShareGroupOffsets; the
GROUP config resource; ACLs (READ on the group and the topic)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import ListConfigResourcesRequest
from tests._wait import wait_until
from tests.broker._share import (
    create_topic,
    earliest,
    heartbeat,
    produce,
    share_ack,
    share_fetch,
    start_offset,
)
from tests.broker._wire import Wire, api_versions, ensure_topic

from seglog.broker import BrokerProcess, start_broker
from seglog.broker.protocol.messages import share_group as sg

UNKNOWN_MEMBER_ID, INVALID_REQUEST, FENCED_MEMBER_EPOCH = 25, 42, 110
INVALID_RECORD_STATE, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 121, 122, 123
GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, UNKNOWN_TOPIC_ID = 69, 68, 100
GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED = 30, 29
TOPIC_ID = uuid.UUID("3f1c1d2e-0000-4000-8000-00000000abcd")


# -- schemas ---------------------------------------------------------------------------


def _samples() -> list[tuple[Any, int, dict[str, Any]]]:
    fr = sg.ShareFetchResponse
    part = fr.ShareFetchableTopicResponse.PartitionData
    hb = sg.ShareGroupHeartbeatResponse
    dg = sg.ShareGroupDescribeResponse.DescribedGroup
    fq = sg.ShareFetchRequest.FetchTopic
    aq = sg.ShareAcknowledgeRequest.AcknowledgeTopic
    batch = {"first_offset": 3, "last_offset": 5, "acknowledge_types": [1, 0, 3]}
    do = sg.DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
    return [
        (sg.ShareGroupHeartbeatRequest, 1, {"group_id": "g", "member_id": "m", "member_epoch": 0,
         "rack_id": None, "subscribed_topic_names": ["a", "b"]}),
        (hb, 1, {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m",
         "member_epoch": 3, "heartbeat_interval_ms": 5000, "assignment": hb.Assignment(
             topic_partitions=[hb.Assignment.TopicPartitions(topic_id=TOPIC_ID, partitions=[0, 2])]
         )}),
        (sg.ShareGroupDescribeRequest, 1, {"group_ids": ["g"],
                                           "include_authorized_operations": True}),
        (sg.ShareGroupDescribeResponse, 1, {"throttle_time_ms": 0, "groups": [dg(
            error_code=0, error_message=None, group_id="g", group_state="Stable", group_epoch=2,
            assignment_epoch=2, assignor_name="simple", authorized_operations=-1, members=[
                dg.Member(member_id="m", rack_id=None, member_epoch=2, client_id="c",
                          client_host="/h", subscribed_topic_names=["a"],
                          assignment=dg.Member.Assignment(topic_partitions=[
                              dg.Member.Assignment.TopicPartitions(
                                  topic_id=TOPIC_ID, topic_name="a", partitions=[1])]))])]}),
        (sg.ShareFetchRequest, 1, {"group_id": "g", "member_id": "m", "share_session_epoch": 1,
         "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1024, "max_records": 500,
         "batch_size": 500, "topics": [fq(topic_id=TOPIC_ID, partitions=[fq.FetchPartition(
             partition_index=0, acknowledgement_batches=[
                 fq.FetchPartition.AcknowledgementBatch(**batch)])])],
         "forgotten_topics_data": [sg.ShareFetchRequest.ForgottenTopic(
             topic_id=TOPIC_ID, partitions=[1])]}),
        (fr, 1, {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
         "acquisition_lock_timeout_ms": 30000, "node_endpoints": [], "responses": [
             fr.ShareFetchableTopicResponse(topic_id=TOPIC_ID, partitions=[part(
                 partition_index=0, error_code=0, error_message=None, acknowledge_error_code=121,
                 acknowledge_error_message=None,
                 current_leader=part.LeaderIdAndEpoch(leader_id=1, leader_epoch=0),
                 records=b"batch", acquired_records=[part.AcquiredRecords(
                     first_offset=0, last_offset=9, delivery_count=2)])])]}),
        (sg.ShareAcknowledgeRequest, 1, {"group_id": "g", "member_id": "m",
         "share_session_epoch": 2, "topics": [aq(topic_id=TOPIC_ID, partitions=[
             aq.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                 aq.AcknowledgePartition.AcknowledgementBatch(**batch)])])]}),
        (sg.DescribeShareGroupOffsetsResponse, 0, {"throttle_time_ms": 0, "groups": [do(
            group_id="g", error_code=0, error_message=None, topics=[
                do.DescribeShareGroupOffsetsResponseTopic(topic_name="a", topic_id=TOPIC_ID,
                    partitions=[do.DescribeShareGroupOffsetsResponseTopic
                                .DescribeShareGroupOffsetsResponsePartition(
                        partition_index=0, start_offset=7, leader_epoch=0, error_code=0,
                        error_message=None)])])]}),
        (sg.DeleteShareGroupOffsetsRequest, 0, {"group_id": "g", "topics": [
            sg.DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(
                topic_name="a")]}),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "version", "fields"), _samples(), ids=lambda v: getattr(v, "name", None)
)
def test_schema_round_trip(cls: Any, version: int, fields: dict[str, Any]) -> None:
    msg = cls[version](**fields)
    again = cls.decode(msg.encode(), version=version)
    assert again.to_dict() == msg.to_dict()
    assert again.encode() == msg.encode()


def test_api_versions_advertise_share_apis(broker: str) -> None:
    served = api_versions(broker)
    assert {k: served[k] for k in (76, 77, 78, 79)} == dict.fromkeys((76, 77, 78, 79), (1, 1))
    assert {k: served[k] for k in (90, 91, 92)} == dict.fromkeys((90, 91, 92), (0, 0))


# -- membership ------------------------------------------------------------------------


def test_heartbeat_errors(broker: str, topic: str) -> None:
    create_topic(broker, topic, partitions=2)
    with Wire(broker) as w:
        assert heartbeat(w, "hb", "nobody", 3).error_code == UNKNOWN_MEMBER_ID
        assert heartbeat(w, "hb", "m1", 0).error_code == INVALID_REQUEST  # no subscription
        assert heartbeat(w, "hb", "", 0, [topic]).error_code == INVALID_REQUEST  # no member id
        joined = heartbeat(w, "hb", "m1", 0, [topic])
        assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "m1", 1)
        assert [(tp.partitions) for tp in joined.assignment.topic_partitions] == [[0, 1]]
        assert heartbeat(w, "hb", "m1", 7).error_code == FENCED_MEMBER_EPOCH
        # a second member: both get both partitions? no: 2 members, 2 partitions, one each
        second = heartbeat(w, "hb", "m2", 0, [topic])
        assert second.member_epoch == 2
        assert [tp.partitions for tp in second.assignment.topic_partitions] == [[1]]
        again = heartbeat(w, "hb", "m1", 1)
        assert again.member_epoch == 2
        assert [tp.partitions for tp in again.assignment.topic_partitions] == [[0]]
        assert heartbeat(w, "hb", "m1", 2).assignment is None  # unchanged: not repeated
        # three members, two partitions: every member reads, partitions are shared
        heartbeat(w, "hb", "m3", 0, [topic])
        desc = w.call(
            sg.ShareGroupDescribeRequest[1](group_ids=["hb", "none"],
                                            include_authorized_operations=False)
        )  # fmt: skip
        group, missing = desc.groups
        assert (group.error_code, group.group_state, group.group_epoch) == (0, "Stable", 3)
        assigned = {m.member_id: m.assignment.topic_partitions[0].partitions for m in group.members}
        assert assigned == {"m1": [0], "m2": [1], "m3": [0]}
        assert missing.error_code == GROUP_ID_NOT_FOUND
        left = heartbeat(w, "hb", "m3", -1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        assert heartbeat(w, "hb", "m3", 3).error_code == UNKNOWN_MEMBER_ID


# -- share fetch, acknowledge ----------------------------------------------------------


def test_share_session_and_acknowledgement_errors(broker: str, topic: str) -> None:
    group = "share-errors"
    create_topic(broker, topic)
    earliest(broker, group)
    produce(broker, topic, 2)  # two record batches: 0-1 and 2-3 (records are acquired
    produce(broker, topic, 2)  # in whole batches, MaxRecords a soft limit, as Kafka's)
    with Wire(broker) as w, Wire(broker) as other:
        tid = ensure_topic(w, topic)
        heartbeat(w, group, "a", 0, [topic])
        heartbeat(other, group, "b", 0, [topic])
        assert share_fetch(w, group, "a", 3, tid).error_code == SHARE_SESSION_NOT_FOUND
        opening = share_fetch(w, group, "a", 0, tid, acks=[(0, 0, [1])])
        assert opening.error_code == INVALID_REQUEST  # acknowledgements cannot open a session
        resp = share_fetch(w, group, "a", 0, tid, max_records=1)
        assert resp.error_code == 0
        assert resp.acquisition_lock_timeout_ms == 30_000
        part = resp.responses[0].partitions[0]
        acquired = [
            (r.first_offset, r.last_offset, r.delivery_count) for r in part.acquired_records
        ]
        assert acquired == [(0, 1, 1)]
        assert part.records  # the batch holding them
        assert share_fetch(w, group, "a", 5, tid).error_code == INVALID_SHARE_SESSION_EPOCH
        # b's session: acknowledging a's records, or records nobody acquired, is 121
        assert share_fetch(other, group, "b", 0, None, max_records=0).error_code == 0
        stolen = share_ack(other, group, "b", 1, tid, [(0, 1, [1])])
        assert stolen.error_code == 0, stolen
        assert stolen.responses[0].partitions[0].error_code == INVALID_RECORD_STATE
        never = share_ack(w, group, "a", 1, tid, [(1, 3, [1])])  # 2, 3: not acquired
        assert never.responses[0].partitions[0].error_code == INVALID_RECORD_STATE
        bad_type = share_ack(w, group, "a", 2, tid, [(0, 0, [7])])
        assert bad_type.responses[0].partitions[0].error_code == INVALID_REQUEST
        assert share_ack(w, group, "a", 0, tid, [(0, 0, [1])]).error_code == 123
        # all or nothing: nothing of the failed acknowledgements applied; now accept 0-1
        ok = share_ack(w, group, "a", 3, tid, [(0, 1, [1])])
        assert ok.responses[0].partitions[0].error_code == 0
        assert start_offset(broker, group, topic) == 2
        again = share_ack(w, group, "a", 4, tid, [(0, 0, [1])])  # already accepted
        assert again.responses[0].partitions[0].error_code == INVALID_RECORD_STATE
        unknown = share_ack(w, group, "a", 5, uuid.uuid4(), [(0, 0, [1])])
        assert unknown.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_ID
        # piggy-backed on ShareFetch: acquire 2-3, accept them with the next fetch
        nxt = share_fetch(w, group, "a", 6, tid)
        assert [r.first_offset for r in nxt.responses[0].partitions[0].acquired_records] == [2]
        done = share_fetch(w, group, "a", 7, tid, acks=[(2, 3, [1])], max_wait_ms=0)
        assert done.responses[0].partitions[0].acknowledge_error_code == 0
        assert start_offset(broker, group, topic) == 4
        closing = share_fetch(w, group, "a", -1, tid)
        assert closing.error_code == 0
        assert share_fetch(w, group, "a", 8, tid).error_code == SHARE_SESSION_NOT_FOUND


def test_leaving_member_final_acknowledgement(broker: str, topic: str) -> None:
    """librdkafka's close: a heartbeat leaving the group, then the last acknowledgements
    with epoch -1, which count (the session may be gone already) and release the rest."""
    group = "share-leave"
    create_topic(broker, topic)
    earliest(broker, group)
    produce(broker, topic, 3)
    with Wire(broker) as w:
        tid = ensure_topic(w, topic)
        heartbeat(w, group, "a", 0, [topic])
        got = share_fetch(w, group, "a", 0, tid).responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset) for r in got] == [(0, 2)]
        assert heartbeat(w, group, "a", -1).member_epoch == -1  # left the group
        final = share_ack(w, group, "a", -1, tid, [(0, 0, [1])])
        assert (final.error_code, final.responses[0].partitions[0].error_code) == (0, 0)
        closed_twice = share_ack(w, group, "a", -1, tid, [(1, 1, [1])])  # 1: released
        assert closed_twice.responses[0].partitions[0].error_code == INVALID_RECORD_STATE
        heartbeat(w, group, "b", 0, [topic])
        again = share_fetch(w, group, "b", 0, tid).responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again] == [(1, 2, 2)]
        assert start_offset(broker, group, topic) == 1


# -- administration --------------------------------------------------------------------


def _alter(w: Wire, group: str, topic: str, offset: int) -> Any:
    req = sg.AlterShareGroupOffsetsRequest[0]
    t = req.AlterShareGroupOffsetsRequestTopic
    return w.call(
        req(group_id=group, topics=[t(topic_name=topic, partitions=[
            t.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset)])])
    )  # fmt: skip


def _delete(w: Wire, group: str, topic: str) -> Any:
    req = sg.DeleteShareGroupOffsetsRequest[0]
    return w.call(
        req(group_id=group, topics=[req.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])
    )


def test_closed_connection_releases_the_sessions_records(broker: str, topic: str) -> None:
    """Kafka closes a share session with the connection that opened it and releases the
    member's acquired records: another member gets them at once (the lock is 30 s)."""
    group = "share-disconnect"
    create_topic(broker, topic)
    earliest(broker, group)
    produce(broker, topic, 3)
    with Wire(broker) as w:
        tid = ensure_topic(w, topic)
        heartbeat(w, group, "a", 0, [topic])
        heartbeat(w, group, "b", 0, [topic])
        with Wire(broker) as a_conn:  # a's share session lives on this connection
            got = share_fetch(a_conn, group, "a", 0, tid).responses[0].partitions[0]
            assert [(r.first_offset, r.last_offset) for r in got.acquired_records] == [(0, 2)]
            none = share_fetch(w, group, "b", 0, tid, max_wait_ms=0).responses[0].partitions[0]
            assert none.acquired_records == []  # a holds them
        # a's connection is closed: its records are due again, its session is gone
        taken: list[tuple[int, int, int]] = []
        epoch = [0]

        def b_gets_them() -> bool:
            epoch[0] += 1
            resp = share_fetch(w, group, "b", epoch[0], tid, max_wait_ms=100)
            assert resp.error_code == 0
            for t in resp.responses:
                for p in t.partitions:
                    taken.extend(
                        (r.first_offset, r.last_offset, r.delivery_count)
                        for r in p.acquired_records
                    )
            return bool(taken)

        wait_until(b_gets_them, timeout=10, message="b acquires a's released records")
        assert taken == [(0, 2, 2)]
        assert share_fetch(w, group, "a", 1, tid).error_code == SHARE_SESSION_NOT_FOUND


def _ranges(resp: Any) -> list[tuple[int, int]]:
    return [
        (r.first_offset, r.last_offset)
        for t in resp.responses
        for p in t.partitions
        for r in p.acquired_records
    ]


def test_fetch_max_bytes_and_min_bytes(broker: str, topic: str) -> None:
    """MaxBytes bounds the new batches acquired (at least one, KIP-74); MinBytes makes a
    fetch hold what it acquired and wait for more, up to MaxWaitMs."""
    group = "share-bytes"
    create_topic(broker, topic)
    earliest(broker, group)
    for _ in range(3):
        produce(broker, topic, 2)  # batches 0-1, 2-3, 4-5
    with Wire(broker) as w:
        tid = ensure_topic(w, topic)
        heartbeat(w, group, "a", 0, [topic])
        one = share_fetch(w, group, "a", 0, tid, max_bytes=1)
        assert _ranges(one) == [(0, 1)]  # one batch although larger than MaxBytes
        batch = len(one.responses[0].partitions[0].records)
        two = share_fetch(w, group, "a", 1, tid, max_bytes=2 * batch)
        assert _ranges(two) == [(2, 5)]
        # MinBytes of two batches: the fetch keeps 6-7 and waits for the next batch
        acked = [(0, 5, [1])]
        result: list[Any] = []
        waiting = threading.Thread(
            target=lambda: result.append(
                share_fetch(w, group, "a", 2, tid, acks=acked, min_bytes=2 * batch,
                            max_wait_ms=20_000)
            )
        )  # fmt: skip
        produce(broker, topic, 2)  # 6-7
        started = time.monotonic()
        waiting.start()
        produce(broker, topic, 2)  # 8-9: enough bytes (before or while the fetch waits)
        waiting.join(20)
        assert time.monotonic() - started < 15  # answered on the new batch, not at 20 s
        assert result
        covered = [o for first, last in _ranges(result[0]) for o in range(first, last + 1)]
        assert covered == [6, 7, 8, 9]
        # MinBytes never reached: the answer at MaxWaitMs carries what was acquired
        produce(broker, topic, 2)  # 10-11
        started = time.monotonic()
        late = share_fetch(w, group, "a", 3, tid, min_bytes=10 * batch, max_wait_ms=600)
        assert _ranges(late) == [(10, 11)]
        assert time.monotonic() - started >= 0.5


def test_alter_and_delete_share_group_offsets(broker: str, topic: str) -> None:
    group = "share-admin"
    create_topic(broker, topic)
    earliest(broker, group)
    produce(broker, topic, 10)
    with Wire(broker) as w:
        tid = ensure_topic(w, topic)
        assert _delete(w, "no-such-group", topic).error_code == GROUP_ID_NOT_FOUND
        heartbeat(w, group, "a", 0, [topic])
        share_fetch(w, group, "a", 0, tid, max_records=3)
        assert start_offset(broker, group, topic) == 0
        assert _alter(w, group, topic, 5).error_code == NON_EMPTY_GROUP
        assert _delete(w, group, topic).error_code == NON_EMPTY_GROUP
        heartbeat(w, group, "a", -1)
        altered = _alter(w, group, topic, 7)
        assert altered.error_code == 0
        assert altered.responses[0].partitions[0].error_code == 0
        assert start_offset(broker, group, topic) == 7
        out_of_range = _alter(w, group, topic, 99)
        assert out_of_range.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
        heartbeat(w, group, "b", 0, [topic])
        got = share_fetch(w, group, "b", 0, tid).responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset) for r in got] == [(7, 9)]
        heartbeat(w, group, "b", -1)
        deleted = _delete(w, group, topic)
        assert (deleted.error_code, deleted.responses[0].error_code) == (0, 0)
        assert start_offset(broker, group, topic) == -1  # no state: starts per reset again


def test_group_config_resource(broker: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    earliest(broker, "share-config")
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, "share-config")])
    (configs,) = (f.result(30) for f in described.values())
    assert configs["share.auto.offset.reset"].value == "earliest"
    entry = ConfigEntry("nope", "1", incremental_operation=AlterConfigOpType.SET)
    bad = ConfigResource(ResourceType.GROUP, "share-config", incremental_configs=[entry])
    with pytest.raises(KafkaException, match=r"nope") as info:
        next(iter(admin.incremental_alter_configs([bad]).values())).result(30)
    assert info.value.args[0].code() == 40  # INVALID_CONFIG
    # ListConfigResources (v1) lists a group once it has a config, first, as Kafka orders
    with Wire(broker) as w:
        listed = w.call(ListConfigResourcesRequest[1](resource_types=[32, 4]))
    rows = [(r.resource_type, r.resource_name) for r in listed.config_resources]
    assert listed.error_code == 0
    assert (32, "share-config") in rows
    assert rows.index((32, "share-config")) < rows.index((4, "0"))


# -- ACLs ------------------------------------------------------------------------------


def _deny_read(admin: AdminClient, kind: Any, name: str) -> None:
    binding = AclBinding(kind, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.READ, AclPermissionType.DENY)  # fmt: skip
    admin.create_acls([binding])[binding].result(30)


def test_acls_need_read_on_group_and_topic(tmp_path: Path) -> None:
    """READ on the group (else 30 for the whole request) and on the topic (else 29 for
    its partitions), as Kafka. ACLs are made while the anonymous principal is a super
    user, then the broker restarts without that (ACLs persist, and so do the group's
    epoch and its ``share.auto.offset.reset``)."""
    data = tmp_path / "data"
    acl = ["--authorizer-class-name", "StandardAuthorizer", "--allow-everyone-if-no-acl-found"]
    proc = start_broker(data, extra_args=[*acl, "--super-users", "User:ANONYMOUS"])
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        for t in ("open", "secret"):
            create_topic(proc.bootstrap, t)
        earliest(proc.bootstrap, "g")
        produce(proc.bootstrap, "open", 1)
        _deny_read(admin, ResourceType.TOPIC, "secret")
        _deny_read(admin, ResourceType.GROUP, "closed")
        with Wire(proc.bootstrap) as w:
            ids = {t: ensure_topic(w, t) for t in ("open", "secret")}
            assert heartbeat(w, "g", "early", 0, ["open"]).member_epoch == 1
    finally:
        assert proc.stop() == 0, proc.log_text()
    proc = start_broker(data, extra_args=acl)
    try:
        with Wire(proc.bootstrap) as w:
            assert heartbeat(w, "closed", "m", 0, ["open"]).error_code == GROUP_AUTHORIZATION_FAILED
            assert share_fetch(w, "closed", "m", 0, ids["open"]).error_code == 30
            assert share_ack(w, "closed", "m", 1, ids["open"], [(0, 0, [1])]).error_code == 30
            joined = heartbeat(w, "g", "m", 0, ["open", "secret"])
            # the group epoch survived the restart (__share_group_state); members did not
            assert (joined.error_code, joined.member_epoch) == (0, 2)
            denied = share_fetch(w, "g", "m", 0, ids["secret"], max_wait_ms=0)
            assert denied.error_code == 0
            assert denied.responses[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED
            allowed = share_fetch(w, "g", "m", 1, ids["open"])
            assert allowed.responses[0].partitions[0].acquired_records[0].first_offset == 0
    finally:
        assert proc.stop() == 0, proc.log_text()


def test_silent_member_expires_and_its_records_go_to_another(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """A member without a heartbeat for ``group.share.session.timeout.ms`` leaves the
    group: its records are released at once (long before their 30 s locks expire) and its
    share session is gone."""
    proc = broker_factory(["--group-share-session-timeout-ms", "500"])
    group, topic = "share-expiry", "expiring"
    create_topic(proc.bootstrap, topic)
    earliest(proc.bootstrap, group)
    produce(proc.bootstrap, topic, 2)
    with Wire(proc.bootstrap) as w:
        tid = ensure_topic(w, topic)
        heartbeat(w, group, "silent", 0, [topic])
        got = share_fetch(w, group, "silent", 0, tid).responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset) for r in got] == [(0, 1)]
        epoch = heartbeat(w, group, "alive", 0, [topic]).member_epoch
        again: list[Any] = []

        def redelivered() -> bool:
            nonlocal epoch
            epoch = heartbeat(w, group, "alive", epoch).member_epoch  # "alive" stays
            resp = share_fetch(w, group, "alive", 0, tid, max_wait_ms=100)
            again.extend(resp.responses[0].partitions[0].acquired_records)
            return bool(again)

        wait_until(redelivered, timeout=20)
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again] == [(0, 1, 2)]
        assert heartbeat(w, group, "silent", 1).error_code == UNKNOWN_MEMBER_ID
        assert share_fetch(w, group, "silent", 1, tid).error_code == SHARE_SESSION_NOT_FOUND
