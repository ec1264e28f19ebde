"""The ConsumerGroupHeartbeat / ConsumerGroupDescribe schemas of
``seglog.broker.protocol.messages`` (Kafka's JSON message-schema format, read by
kafka-python): known bytes and round trips for every version served."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from seglog.broker.apis.registry import REGISTRY
from seglog.broker.protocol.messages import consumer_group as cg

HB_REQ: Any = cg.ConsumerGroupHeartbeatRequest
HB_RESP: Any = cg.ConsumerGroupHeartbeatResponse
DESC_REQ: Any = cg.ConsumerGroupDescribeRequest
DESC_RESP: Any = cg.ConsumerGroupDescribeResponse

TOPIC_ID = uuid.UUID("a9f58594-937c-45fd-88ce-18462a8429e9")

# ConsumerGroupHeartbeatRequest v1 written out field by field (flexible: compact strings
# and arrays are length+1 uvarints, nulls are 0, each struct ends with an empty tag buffer)
HB_V1 = bytes.fromhex(
    "0267"  # GroupId "g"
    "026d"  # MemberId "m"
    "00000000"  # MemberEpoch 0
    "00"  # InstanceId null
    "00"  # RackId null
    "000493e0"  # RebalanceTimeoutMs 300000
    "020261"  # SubscribedTopicNames ["a"]
    "00"  # SubscribedTopicRegex null (v1+)
    "00"  # ServerAssignor null
    "02" + TOPIC_ID.hex + "03"
    "00000000"
    "00000001"
    "00"  # [{TopicId, [0, 1]}]
    "00"  # tagged fields
)


def test_heartbeat_request_v1_known_bytes() -> None:
    req = HB_REQ[1](
        group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=300_000,
        subscribed_topic_names=["a"],
        topic_partitions=[HB_REQ.TopicPartitions(topic_id=TOPIC_ID, partitions=[0, 1])],
    )  # fmt: skip
    assert bytes(req.encode()) == HB_V1
    back = HB_REQ.decode(HB_V1, version=1)
    assert back.subscribed_topic_regex is None
    assert back.topic_partitions[0].topic_id == TOPIC_ID


def test_heartbeat_request_v0_has_no_regex() -> None:
    v0 = HB_V1.replace(bytes.fromhex("02026100"), bytes.fromhex("020261"), 1)
    req = HB_REQ.decode(v0, version=0)
    assert req.subscribed_topic_names == ["a"]
    assert req.server_assignor is None
    assert req.topic_partitions[0].partitions == [0, 1]


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_round_trips(version: int) -> None:
    req = HB_REQ[version](
        group_id="grp", member_id="", member_epoch=-2, instance_id="i", rack_id="r",
        server_assignor="range", topic_partitions=None,
        **({"subscribed_topic_regex": "t.*"} if version else {}),
    )  # fmt: skip
    back = HB_REQ.decode(req.encode(), version=version)
    assert (back.instance_id, back.rack_id, back.member_epoch) == ("i", "r", -2)
    assert back.rebalance_timeout_ms == -1  # the schema's default
    if version:
        assert back.subscribed_topic_regex == "t.*"
    assignment = HB_RESP.Assignment(
        topic_partitions=[HB_RESP.Assignment.TopicPartitions(topic_id=TOPIC_ID, partitions=[3])]
    )
    resp = HB_RESP[version](
        throttle_time_ms=0, error_code=0, member_id="m", member_epoch=5,
        heartbeat_interval_ms=500, assignment=assignment,
    )  # fmt: skip
    raw = bytes(resp.encode())
    # ThrottleTimeMs, ErrorCode, ErrorMessage null, MemberId "m", MemberEpoch 5, interval 500
    assert raw.startswith(bytes.fromhex("00000000000000026d00000005000001f4"))
    back_resp = HB_RESP.decode(raw, version=version)
    assert back_resp.assignment.topic_partitions[0].partitions == [3]
    none = HB_RESP.decode(
        HB_RESP[version](member_epoch=1, heartbeat_interval_ms=1).encode(), version=version
    )
    assert none.assignment is None


def test_describe_round_trip() -> None:
    req = DESC_REQ[0](group_ids=["g"], include_authorized_operations=False)
    assert bytes(req.encode()) == bytes.fromhex("0202670000")
    member = DESC_RESP.DescribedGroup.Member
    assignment = member.Assignment(
        topic_partitions=[
            member.Assignment.TopicPartitions(topic_id=TOPIC_ID, topic_name="a", partitions=[0])
        ]
    )
    group = DESC_RESP.DescribedGroup(
        error_code=0, group_id="g", group_state="Stable", group_epoch=3, assignment_epoch=3,
        assignor_name="uniform",
        members=[
            member(
                member_id="m", member_epoch=3, client_id="c", client_host="/h",
                subscribed_topic_names=["a"], assignment=assignment, target_assignment=assignment,
            )
        ],
    )  # fmt: skip
    back = DESC_RESP.decode(DESC_RESP[0](throttle_time_ms=0, groups=[group]).encode(), version=0)
    described = back.groups[0]
    assert (described.group_state, described.assignor_name) == ("Stable", "uniform")
    assert described.authorized_operations == -(2**31)  # the schema's default
    assert described.members[0].target_assignment.topic_partitions[0].topic_name == "a"


def test_describe_v1_carries_the_member_type() -> None:
    """KIP-1099: v1 appends MemberType (int8) to each member; v0 leaves it out (one byte
    less) and decodes it as the schema's default, -1."""
    member = DESC_RESP.DescribedGroup.Member
    empty = member.Assignment(topic_partitions=[])
    m = member(
        member_id="m", member_epoch=1, client_id="c", client_host="/h", subscribed_topic_names=[],
        assignment=empty, target_assignment=empty, member_type=1,
    )  # fmt: skip
    group = DESC_RESP.DescribedGroup(
        error_code=0, group_id="g", group_state="Stable", group_epoch=1, assignment_epoch=1,
        assignor_name="uniform", members=[m],
    )  # fmt: skip
    wire = {v: bytes(DESC_RESP[v](throttle_time_ms=0, groups=[group]).encode()) for v in (0, 1)}
    assert len(wire[1]) == len(wire[0]) + 1
    assert DESC_RESP.decode(wire[1], version=1).groups[0].members[0].member_type == 1
    assert DESC_RESP.decode(wire[0], version=0).groups[0].members[0].member_type == -1
    assert DESC_REQ[1](group_ids=["g"], include_authorized_operations=False).encode() == (
        DESC_REQ[0](group_ids=["g"], include_authorized_operations=False).encode()
    )


def test_served_versions() -> None:
    assert (REGISTRY[68].min_version, REGISTRY[68].max_version) == (0, 1)
    assert (REGISTRY[69].min_version, REGISTRY[69].max_version) == (0, 1)
