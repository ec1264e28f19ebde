"""Classic, KIP-848 consumer and KIP-932 share groups in the group APIs, as Kafka 4.x:
ListGroups lists share groups (type and protocol type "share", states Empty/Stable, the
v4 state and v5 type filters), DescribeGroups describes them as a non-classic group (Dead;
69 "not a classic group" from v6), DeleteGroups refuses one with members (68) and otherwise
deletes its state (share partitions, ``__share_group_state`` record: a new group of that id
starts afresh, also after a restart), and one group id is one kind of group (23 / 69)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest
from tests.broker._share import (
    create_topic,
    earliest,
    heartbeat,
    produce,
    share_ack,
    share_fetch,
    start_offset,
)
from tests.broker._wire import Wire, ensure_topic

from seglog.broker import BrokerProcess
from seglog.broker.protocol.messages import share_group as sg
from seglog.broker.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from seglog.broker.protocol.messages.share_group import ShareGroupDescribeRequest

INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED = 23, 79
GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP = 69, 68
ACCEPT = 1


def _listed(w: Wire, version: int = 5, **filters: list[str]) -> dict[str, tuple[str, ...]]:
    """group id -> (protocol type, state, type) of ListGroups at ``version`` (fields it
    lacks are left out)."""
    if version >= 4:
        filters.setdefault("states_filter", [])
    if version >= 5:
        filters.setdefault("types_filter", [])
    resp = w.call(ListGroupsRequest[version](**filters))
    assert resp.error_code == 0
    out = {}
    for g in resp.groups:
        row = [g.protocol_type]
        if version >= 4:
            row.append(g.group_state)
        if version >= 5:
            row.append(g.group_type)
        out[g.group_id] = tuple(row)
    return out


def _describe_classic(w: Wire, group: str, version: int) -> Any:
    resp = w.call(
        DescribeGroupsRequest[version](groups=[group], include_authorized_operations=False)
    )
    return resp.groups[0]


def _delete_groups(w: Wire, *groups: str) -> dict[str, int]:
    resp = w.call(DeleteGroupsRequest[2](groups_names=list(groups)))
    return {r.group_id: r.error_code for r in resp.results}


def _share_describe(w: Wire, group: str) -> Any:
    req = ShareGroupDescribeRequest[1](group_ids=[group], include_authorized_operations=False)
    return w.call(req).groups[0]


def _join(w: Wire, group: str) -> Any:
    return w.call(
        JoinGroupRequest[9](
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
            reason=None,
        )
    )  # fmt: skip


def _consumer_hb(
    w: Wire, group: str, member: str, epoch: int, topics: list[str] | None = None
) -> Any:
    return w.call(
        ConsumerGroupHeartbeatRequest[1](
            group_id=group, member_id=member, member_epoch=epoch, instance_id=None,
            rack_id=None, rebalance_timeout_ms=10_000, subscribed_topic_names=topics,
            subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=[] if epoch == 0 else None,
        )
    )  # fmt: skip


def _commit(w: Wire, group: str, topic: str, offset: int) -> int:
    req = OffsetCommitRequest[8]
    topics = [
        req.OffsetCommitRequestTopic(
            name=topic,
            partitions=[
                req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata="",
                )
            ],
        )
    ]  # fmt: skip
    resp = w.call(
        req(group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=topics)
    )  # fmt: skip
    return int(resp.topics[0].partitions[0].error_code)


def _share_offsets_errors(w: Wire, group: str, topic: str) -> list[tuple[int, str | None]]:
    """(error code, message) of Describe-, Alter- and DeleteShareGroupOffsets for ``group``."""
    dreq: Any = sg.DescribeShareGroupOffsetsRequest[0]
    dgroup = dreq.DescribeShareGroupOffsetsRequestGroup
    described = w.call(
        dreq(groups=[dgroup(group_id=group, topics=[
            dgroup.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])])
    ).groups[0]  # fmt: skip
    areq: Any = sg.AlterShareGroupOffsetsRequest[0]
    atopic = areq.AlterShareGroupOffsetsRequestTopic
    altered = w.call(
        areq(group_id=group, topics=[atopic(topic_name=topic, partitions=[
            atopic.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
    )  # fmt: skip
    xreq: Any = sg.DeleteShareGroupOffsetsRequest[0]
    deleted = w.call(
        xreq(group_id=group, topics=[xreq.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])
    )
    return [(r.error_code, r.error_message) for r in (described, altered, deleted)]


def test_share_group_listed_described_and_deleted(broker: str, topic: str) -> None:
    group = f"share-{topic}"
    create_topic(broker, topic)
    earliest(broker, group)
    produce(broker, topic, 3)
    with Wire(broker) as w:
        tid = ensure_topic(w, topic)
        joined = heartbeat(w, group, "a", 0, [topic])
        assert (joined.error_code, joined.member_epoch) == (0, 1)
        assert _listed(w)[group] == ("share", "Stable", "share")
        assert _listed(w, types_filter=["SHARE"])[group] == ("share", "Stable", "share")
        assert group not in _listed(w, types_filter=["classic", "consumer"])
        assert group in _listed(w, 4, states_filter=["stable"])
        assert group not in _listed(w, 4, states_filter=["empty"])
        assert _listed(w, 0)[group] == ("share",)  # every version lists share groups
        # DescribeGroups: not a classic group
        old = _describe_classic(w, group, 5)
        assert (old.error_code, old.group_state, old.members) == (0, "Dead", [])
        v6 = _describe_classic(w, group, 6)
        assert (v6.error_code, v6.error_message, v6.group_state) == (
            GROUP_ID_NOT_FOUND,
            f"Group {group} is not a classic group.",
            "Dead",
        )
        # state in the share partition: offsets 0 and 1 accepted, start offset 2
        got = share_fetch(w, group, "a", 0, tid).responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset) for r in got] == [(0, 2)]
        assert share_ack(w, group, "a", 1, tid, [(0, 1, [ACCEPT])]).error_code == 0
        assert start_offset(broker, group, topic) == 2
        assert _delete_groups(w, group) == {group: NON_EMPTY_GROUP}  # a member is active
        assert _listed(w)[group] == ("share", "Stable", "share")
        assert heartbeat(w, group, "a", -1).error_code == 0
        assert _listed(w)[group] == ("share", "Empty", "share")
        assert group in _listed(w, 4, states_filter=["Empty"])

        assert _delete_groups(w, group) == {group: 0}
        assert group not in _listed(w)
        gone = _share_describe(w, group)
        assert (gone.error_code, gone.error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {group} not found.",
        )
        assert start_offset(broker, group, topic) == -1000 - GROUP_ID_NOT_FOUND
        assert _delete_groups(w, group) == {group: GROUP_ID_NOT_FOUND}

        # a new group of that id starts afresh: epoch 1, the default "latest" reset (its
        # config override went with the group), no state for offsets 0-2
        again = heartbeat(w, group, "b", 0, [topic])
        assert (again.error_code, again.member_epoch) == (0, 1)
        fresh = share_fetch(w, group, "b", 0, tid, max_wait_ms=100)
        assert fresh.responses[0].partitions[0].acquired_records == []
        assert start_offset(broker, group, topic) == 3
        assert heartbeat(w, group, "b", -1).error_code == 0
        assert _delete_groups(w, group) == {group: 0}


def test_deleted_share_group_stays_deleted_after_a_restart(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    first = broker_factory()
    kept, deleted = f"kept-{topic}", f"deleted-{topic}"
    create_topic(first.bootstrap, topic)
    with Wire(first.bootstrap) as w:
        tid = ensure_topic(w, topic)
        for group in (kept, deleted):
            assert heartbeat(w, group, "a", 0, [topic]).error_code == 0
            share_fetch(w, group, "a", 0, tid, max_wait_ms=100)
            assert heartbeat(w, group, "a", -1).error_code == 0
        assert _delete_groups(w, deleted) == {deleted: 0}
    assert start_offset(first.bootstrap, kept, topic) == 0
    assert first.stop() == 0, first.log_text()
    second = broker_factory(data=first.data_dir)
    with Wire(second.bootstrap) as w:
        listed = _listed(w, types_filter=["share"])
        assert listed.get(kept) == ("share", "Empty", "share")
        assert deleted not in listed
        # the deleted group's share partition is gone too; the kept one's is not
        assert start_offset(second.bootstrap, kept, topic) == 0
        assert heartbeat(w, deleted, "b", 0, [topic]).member_epoch == 1
        assert start_offset(second.bootstrap, deleted, topic) == -1
        assert heartbeat(w, deleted, "b", -1).error_code == 0


def _offset_fetch_errors(w: Wire, group: str, topic: str) -> list[int]:
    """The group's error of OffsetFetch v7 (one group) and v8 (per group)."""
    flat = w.call(
        OffsetFetchRequest[7](
            group_id=group,
            topics=[
                OffsetFetchRequest[7].OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
            ],
            require_stable=False,
        )
    )
    group_cls = OffsetFetchRequest[8].OffsetFetchRequestGroup
    per_group = w.call(
        OffsetFetchRequest[8](groups=[group_cls(group_id=group, topics=None)], require_stable=False)
    )
    assert flat.topics == []
    assert per_group.groups[0].topics == []
    return [flat.error_code, per_group.groups[0].error_code]


def test_one_group_id_is_one_kind_of_group(broker: str, topic: str) -> None:
    share, consumer, classic = f"share-{topic}", f"consumer-{topic}", f"classic-{topic}"
    create_topic(broker, topic)
    with Wire(broker) as w:
        assert heartbeat(w, share, "s", 0, [topic]).error_code == 0
        assert _consumer_hb(w, consumer, "c", 0, [topic]).error_code == 0
        assert _commit(w, classic, topic, 0) == 0  # a classic group of committed offsets

        # the share group refuses classic and consumer members, while it has members...
        assert _join(w, share).error_code == INCONSISTENT_GROUP_PROTOCOL
        as_consumer = _consumer_hb(w, share, "c", 0, [topic])
        assert (as_consumer.error_code, as_consumer.error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {share} is not a consumer group.",
        )
        described = w.call(
            ConsumerGroupDescribeRequest[1](group_ids=[share], include_authorized_operations=False)
        ).groups[0]
        assert (described.error_code, described.error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {share} is not a consumer group.",
        )
        # no committed offsets for a share group (Kafka's ShareGroup.validateOffsetCommit
        # and validateOffsetFetch), and nothing is stored
        assert _commit(w, share, topic, 0) == GROUP_ID_NOT_FOUND
        assert _offset_fetch_errors(w, share, topic) == [GROUP_ID_NOT_FOUND] * 2
        # ...and while it is empty (it exists until DeleteGroups)
        assert heartbeat(w, share, "s", -1).error_code == 0
        assert _commit(w, share, topic, 0) == GROUP_ID_NOT_FOUND
        assert _join(w, share).error_code == INCONSISTENT_GROUP_PROTOCOL
        assert _consumer_hb(w, share, "c", 0, [topic]).error_code == GROUP_ID_NOT_FOUND

        # classic and consumer groups refuse share members
        for other in (consumer, classic):
            refused = heartbeat(w, other, "s", 0, [topic])
            assert (refused.error_code, refused.error_message) == (
                GROUP_ID_NOT_FOUND,
                f"Group {other} is not a share group.",
            )
            not_share = _share_describe(w, other)
            assert (not_share.error_code, not_share.error_message) == (
                GROUP_ID_NOT_FOUND,
                f"Group {other} is not a share group.",
            )
            assert (
                _share_offsets_errors(w, other, topic)
                == [(GROUP_ID_NOT_FOUND, f"Group {other} is not a share group.")] * 3
            )
        assert _listed(w)[consumer][2] == "consumer"
        assert _listed(w)[classic][2] == "classic"
        assert share in _listed(w, types_filter=["share"])

        # once deleted, the share group's id is free for a classic group
        assert _delete_groups(w, share) == {share: 0}
        assert _join(w, share).error_code == MEMBER_ID_REQUIRED  # JoinGroup v4+'s first answer
        assert _consumer_hb(w, consumer, "c", -1).error_code == 0


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_describe_member_type(broker: str, topic: str, version: int) -> None:
    """ConsumerGroupDescribe v1 (KIP-1099) gives each member's type: 1, a consumer-protocol
    member; v0 has no such field (decoded as the schema's default, -1)."""
    group = f"cg-{topic}"
    create_topic(broker, topic)
    with Wire(broker) as w:
        assert _consumer_hb(w, group, "m", 0, [topic]).error_code == 0
        resp = w.call(
            ConsumerGroupDescribeRequest[version](
                group_ids=[group], include_authorized_operations=False
            )
        )
        assert _consumer_hb(w, group, "m", -1).error_code == 0
    (described,) = resp.groups
    assert described.error_code == 0
    assert [(m.member_id, m.member_type) for m in described.members] == [
        ("m", 1 if version >= 1 else -1)
    ]


def test_admin_client_deletes_a_share_group(broker: str, topic: str) -> None:
    """confluent-kafka's AdminClient: delete_consumer_groups deletes an empty share group
    (refused while it has a member); list_consumer_groups, which keeps only groups of
    protocol type "consumer" or "", does not show share groups either way."""
    group = f"share-{topic}"
    create_topic(broker, topic)
    admin = AdminClient({"bootstrap.servers": broker})
    with Wire(broker) as w:
        assert heartbeat(w, group, "a", 0, [topic]).error_code == 0
        with pytest.raises(KafkaException) as refused:
            admin.delete_consumer_groups([group], request_timeout=30)[group].result(30)
        assert refused.value.args[0].code() == NON_EMPTY_GROUP
        assert heartbeat(w, group, "a", -1).error_code == 0
        listed = admin.list_consumer_groups(request_timeout=30).result(30)
        assert group not in {g.group_id for g in listed.valid}
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(30)
        assert group not in _listed(w)


def test_kafka_python_describes_a_share_group_as_not_classic(broker: str, topic: str) -> None:
    """kafka-python 3's admin client (DescribeGroups v6) gets Kafka's answer for a share
    group: GROUP_ID_NOT_FOUND, "Group G is not a classic group."."""
    from kafka.admin import KafkaAdminClient  # noqa: PLC0415

    group = f"share-{topic}"
    create_topic(broker, topic)
    with Wire(broker) as w:
        assert heartbeat(w, group, "a", 0, [topic]).error_code == 0
        admin = KafkaAdminClient(bootstrap_servers=broker)
        try:
            described = admin.describe_groups([group])
        finally:
            admin.close()
        assert heartbeat(w, group, "a", -1).error_code == 0
    error = described[group]["error"]
    assert error is not None
    assert "GroupIdNotFound" in error, error
    assert f"Group {group} is not a classic group." in error
