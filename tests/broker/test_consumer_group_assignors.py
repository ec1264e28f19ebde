"""The KIP-848 server-side assignors (``coordinator.assignors``) and the consumer group
snapshot round trip, as pure functions: no broker."""

from __future__ import annotations

import itertools

import pytest

from seglog.broker.coordinator.assignors import TP, range_assignor, uniform_assignor
from seglog.broker.coordinator.consumer_group_model import (
    ConsumerGroup,
    ConsumerMember,
    GroupState,
    MemberState,
)


def _all(topics: dict[str, int]) -> set[TP]:
    return {(t, p) for t, n in topics.items() for p in range(n)}


def _check_complete(
    result: dict[str, set[TP]], subs: dict[str, set[str]], topics: dict[str, int]
) -> None:
    """Every partition of a subscribed topic to exactly one subscriber of it."""
    owners = [tp for tps in result.values() for tp in tps]
    assert len(owners) == len(set(owners))
    subscribed = {t for s in subs.values() for t in s}
    assert set(owners) == _all({t: n for t, n in topics.items() if t in subscribed})
    for member, tps in result.items():
        assert all(t in subs[member] for t, _ in tps)


@pytest.mark.parametrize(("members", "partitions"), [(1, 6), (3, 6), (4, 6), (5, 3), (7, 20)])
def test_uniform_homogeneous_is_balanced(members: int, partitions: int) -> None:
    subs = {f"m{i}": {"a", "b"} for i in range(members)}
    topics = {"a": partitions, "b": 1}
    result = uniform_assignor(subs, topics, {})
    _check_complete(result, subs, topics)
    loads = [len(tps) for tps in result.values()]
    assert max(loads) - min(loads) <= 1


def test_uniform_is_sticky_when_a_member_joins() -> None:
    topics = {"a": 6}
    before = uniform_assignor({"m1": {"a"}, "m2": {"a"}}, topics, {})
    after = uniform_assignor({"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, topics, before)
    _check_complete(after, {"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, topics)
    assert [len(after[m]) for m in ("m1", "m2", "m3")] == [2, 2, 2]
    # only what m3 needs moves: m1 and m2 keep 2 of their 3 each
    assert after["m1"] <= before["m1"]
    assert after["m2"] <= before["m2"]


def test_uniform_is_sticky_when_a_member_leaves() -> None:
    topics = {"a": 6}
    before = uniform_assignor({"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, topics, {})
    after = uniform_assignor({"m1": {"a"}, "m3": {"a"}}, topics, before)
    assert after["m1"] >= before["m1"]
    assert after["m3"] >= before["m3"]
    assert len(after["m1"]) == len(after["m3"]) == 3


def test_uniform_heterogeneous_subscriptions() -> None:
    subs = {"m1": {"a"}, "m2": {"a", "b"}, "m3": {"b"}, "m4": set()}
    topics = {"a": 4, "b": 4, "c": 2}  # nobody subscribes to c
    result = uniform_assignor(subs, topics, {})
    _check_complete(result, subs, topics)
    assert result["m4"] == set()
    assert sorted(len(result[m]) for m in ("m1", "m2", "m3")) == [2, 3, 3]


def test_uniform_many_shapes_are_complete() -> None:
    topics = {"a": 5, "b": 3, "c": 1}
    names = list(topics)
    for combo in itertools.product([0, 1, 2, 3, 4, 5, 6, 7], repeat=3):
        subs = {
            f"m{i}": {names[j] for j in range(3) if bits >> j & 1} for i, bits in enumerate(combo)
        }
        _check_complete(uniform_assignor(subs, topics, {}), subs, topics)


def test_range_contiguous_ranges_by_member_id() -> None:
    subs = {"b": {"t", "u"}, "a": {"t", "u"}, "c": {"t"}}
    result = range_assignor(subs, {"t": 7, "u": 3}, {})
    _check_complete(result, subs, {"t": 7, "u": 3})
    assert result["a"] == {("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)}
    assert result["b"] == {("t", 3), ("t", 4), ("u", 2)}
    assert result["c"] == {("t", 5), ("t", 6)}


def test_snapshot_round_trip() -> None:
    group = ConsumerGroup("g", group_epoch=7, assignment_epoch=6, assignor="range")
    member = ConsumerMember(
        "m1", instance_id="i1", client_id="c", client_host="/1.2.3.4", rebalance_timeout_ms=5000,
        subscribed_names=("a", "b"), subscribed_regex="x.*", server_assignor="range",
        member_epoch=6, previous_epoch=4, state=MemberState.UNREVOKED_PARTITIONS,
        assigned=frozenset({("a", 0)}), revoking=frozenset({("a", 1)}),
    )  # fmt: skip
    group.members["m1"] = member
    group.static_members["i1"] = "m1"
    group.target["m1"] = frozenset({("a", 0), ("b", 2)})
    group.subscription_metadata = {"a": 2, "b": 3}
    data = group.snapshot()
    back = ConsumerGroup.from_snapshot("g", data)
    assert back.snapshot() == data
    assert back.members["m1"].revoking == frozenset({("a", 1)})
    assert back.static_members == {"i1": "m1"}
    assert back.state() is GroupState.ASSIGNING
    with pytest.raises(ValueError, match="bad consumer group snapshot"):
        ConsumerGroup.from_snapshot("g", b'{"group_epoch": 1}')
