"""OffsetDelete reads the live members' subscriptions (Kafka's
``ConsumerProtocolSubscription``, client-supplied JoinGroup metadata) with the broker's
bounded reader: metadata it cannot read counts as subscribed to every topic (Kafka's
``GroupMetadata.isSubscribedToTopic`` when the subscription does not parse), so a
malformed subscription gets 86 GROUP_SUBSCRIBED_TO_TOPIC and deletes nothing."""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kafka.protocol.consumer import OffsetDeleteRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from seglog.broker.apis.group_admin import handle_offset_delete
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.committed import CommittedOffsets
from seglog.broker.coordinator.group_model import Group, GroupState, Member
from seglog.storage import DataDir

GROUP_SUBSCRIBED_TO_TOPIC = 86
_GOOD = bytes(
    ConsumerProtocolSubscription(version=0, topics=["sub"], user_data=None).encode(version=0)
)  # version 0 | 1 topic | "sub" | null user data
_HEAD = struct.pack(">h", 0)

MALFORMED = {
    "empty": b"",
    "truncated version": _GOOD[:1],
    "negative version": struct.pack(">h", -1) + _GOOD[2:],
    "truncated topic count": _GOOD[:4],
    "null topic array": _HEAD + struct.pack(">i", -1) + _GOOD[-4:],
    "oversize topic count": _HEAD + struct.pack(">i", 0x7FFFFFFF) + _GOOD[6:],
    "truncated topic length": _GOOD[:7],
    "truncated topic string": _GOOD[:10],
    "oversize topic length": _HEAD + struct.pack(">ih", 1, 0x7FFF) + b"sub" + _GOOD[-4:],
    "null topic": _HEAD + struct.pack(">ih", 1, -1) + _GOOD[-4:],
    "non-UTF-8 topic": _HEAD + struct.pack(">ih", 1, 2) + b"\xff\xfe" + _GOOD[-4:],
    "truncated user data length": _GOOD[:-1],
    "missing user data": _GOOD[:-4],
    "oversize user data": _GOOD[:-4] + struct.pack(">i", 100) + b"x",
}


@pytest.fixture
def offsets(tmp_path: Path) -> Iterator[CommittedOffsets]:
    """Committed offsets of group "g": partition 0 of topics "sub" and "other"."""
    with DataDir(tmp_path / "data", create=True) as dd:
        committed = CommittedOffsets(dd)
        commits = {("sub", 0): (5, ""), ("other", 0): (6, "")}
        fut = committed.commit("g", commits)
        committed.log.sync()
        if fut is not None:
            fut.result(10)
            committed.apply("g", commits)
        yield committed


def _offset_delete(offsets: CommittedOffsets, metadata: bytes) -> dict[str, int]:
    """OffsetDelete of both partitions while one member with ``metadata`` is in the
    group; the error code per topic."""
    member = Member(
        "m", None, "client", "127.0.0.1", 6000, 10_000, "consumer", [("range", metadata)]
    )
    group = Group("g", GroupState.STABLE, 1, "consumer", "range", "m", members={"m": member})
    ctx = SimpleNamespace(
        groups=SimpleNamespace(groups={"g": group}),
        consumer_groups=SimpleNamespace(groups={}),  # no KIP-848 group of that id
        committed=offsets,
    )
    rctx = SimpleNamespace(api_version=0, allowed=lambda *_: True)
    part = OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition
    req = OffsetDeleteRequest[0](
        group_id="g",
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=name, partitions=[part(partition_index=0)]
            )
            for name in ("sub", "other")
        ],
    )
    resp: Any = handle_offset_delete(cast(BrokerContext, ctx), cast(RequestContext, rctx), req)
    assert resp.error_code == 0
    return {t.name: t.partitions[0].error_code for t in resp.topics}


@pytest.mark.parametrize(
    "metadata",
    [
        _GOOD,
        bytes(  # a newer version: its v0 prefix is what counts, as in Kafka
            ConsumerProtocolSubscription(
                version=3,
                topics=["sub"],
                user_data=b"u",
                owned_partitions=[],
                generation_id=4,
                rack_id="r",
            ).encode(version=3)
        ),
        struct.pack(">h", 9) + _GOOD[2:] + b"fields of versions to come",
    ],
    ids=["v0", "v3", "v9"],
)
def test_offset_delete_refuses_subscribed_topics_only(
    offsets: CommittedOffsets, metadata: bytes
) -> None:
    assert _offset_delete(offsets, metadata) == {"sub": GROUP_SUBSCRIBED_TO_TOPIC, "other": 0}
    assert offsets.get("g", "sub", 0) == (5, "")
    assert offsets.get("g", "other", 0) is None


@pytest.mark.parametrize("metadata", MALFORMED.values(), ids=MALFORMED.keys())
def test_unreadable_subscription_counts_as_subscribed_to_everything(
    offsets: CommittedOffsets, metadata: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        codes = _offset_delete(offsets, metadata)
    assert codes == {"sub": GROUP_SUBSCRIBED_TO_TOPIC, "other": GROUP_SUBSCRIBED_TO_TOPIC}
    assert offsets.get("g", "sub", 0) == (5, "")
    assert offsets.get("g", "other", 0) == (6, "")
    assert any("subscription" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("state", "group_type", "member_type", "want"),
    [
        (GroupState.STABLE, "connect", "connect", 68),
        (GroupState.COMPLETING_REBALANCE, "connect", "connect", 68),
        # the first generation is being formed: the group has no type yet, its member has
        (GroupState.PREPARING_REBALANCE, None, "connect", 68),
        (GroupState.PREPARING_REBALANCE, None, "consumer", 0),
        (GroupState.STABLE, "consumer", "consumer", 0),
    ],
)
def test_offset_delete_of_group_with_members_by_protocol_type(
    offsets: CommittedOffsets,
    state: GroupState,
    group_type: str | None,
    member_type: str,
    want: int,
) -> None:
    """Kafka's ``handleDeleteOffsets``: a group with members whose protocol type is not
    "consumer" answers 68 NON_EMPTY_GROUP for the whole request and keeps every offset;
    a "consumer" group deletes the partitions of topics no member subscribes to."""
    member = Member("m", None, "client", "127.0.0.1", 6000, 10_000, member_type, [("p", _GOOD)])
    group = Group("g", state, 1, group_type, "p", "m", members={"m": member})
    ctx = SimpleNamespace(
        groups=SimpleNamespace(groups={"g": group}),
        consumer_groups=SimpleNamespace(groups={}),
        committed=offsets,
    )
    rctx = SimpleNamespace(api_version=0, allowed=lambda *_: True)
    part = OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition
    req = OffsetDeleteRequest[0](
        group_id="g",
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name="other", partitions=[part(partition_index=0)]
            )
        ],
    )
    resp: Any = handle_offset_delete(cast(BrokerContext, ctx), cast(RequestContext, rctx), req)
    assert resp.error_code == want
    if want:
        assert resp.topics == []
        assert offsets.get("g", "other", 0) == (6, "")
    else:
        assert [p.error_code for p in resp.topics[0].partitions] == [0]
        assert offsets.get("g", "other", 0) is None
    assert offsets.get("g", "sub", 0) == (5, "")
