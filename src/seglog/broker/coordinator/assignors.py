"""KIP-848's server-side partition assignors: ``uniform`` and ``range`` (Kafka's names, the
values of ``group.consumer.assignors`` and of a consumer's ``group.remote.assignor``).

An assignor maps the members' subscriptions (member id -> topic names, already resolved
from names and regular expressions to existing topics) and the subscribed topics'
partition counts to a target assignment (member id -> set of ``(topic, partition)``).
Every partition of a subscribed topic goes to exactly one member subscribed to it; members
subscribed to nothing get nothing. Both are pure functions of their arguments.

- ``uniform`` (Kafka's ``UniformAssignor``): as even as the subscriptions allow and sticky:
  a partition stays with the member that had it in ``previous`` (the last target
  assignment) unless moving it evens the load out. Homogeneous subscriptions end with
  loads differing by at most one; heterogeneous ones are balanced greedily (a partition
  moves to a less loaded subscriber while that lowers the spread).
- ``range`` (Kafka's ``RangeAssignor``): per topic, its subscribers sorted by member id
  get contiguous ranges of partitions, the first ``partitions % subscribers`` one more;
  co-partitioned topics thus line up. Not sticky.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

__all__ = ["ASSIGNORS", "TP", "Assignor", "range_assignor", "uniform_assignor"]

TP = tuple[str, int]
"""A topic partition: (topic name, partition index)."""

Assignor = Callable[
    [Mapping[str, Set[str]], Mapping[str, int], Mapping[str, Set[TP]]], dict[str, set[TP]]
]
"""``assignor(subscriptions, partition_counts, previous) -> assignment``."""


def _candidates(
    subscriptions: Mapping[str, Set[str]], partitions: Mapping[str, int]
) -> dict[TP, list[str]]:
    """Every partition of a subscribed topic -> its subscribers (sorted)."""
    out: dict[TP, list[str]] = {}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if members:
            for p in range(partitions[topic]):
                out[(topic, p)] = members
    return out


def uniform_assignor(
    subscriptions: Mapping[str, Set[str]],
    partitions: Mapping[str, int],
    previous: Mapping[str, Set[TP]],
) -> dict[str, set[TP]]:
    """Kafka's ``uniform`` assignor (see the module docstring)."""
    result: dict[str, set[TP]] = {m: set() for m in subscriptions}
    candidates = _candidates(subscriptions, partitions)
    owner: dict[TP, str] = {}
    for member in sorted(previous):  # sticky: keep what is still valid
        if member not in result:
            continue
        for tp in sorted(previous[member]):
            if tp not in owner and member in candidates.get(tp, ()):
                owner[tp] = member
                result[member].add(tp)
    # partitions nobody keeps: the least loaded subscriber, the most constrained first
    for tp in sorted(
        (tp for tp in candidates if tp not in owner), key=lambda tp: (len(candidates[tp]), tp)
    ):
        member = min(candidates[tp], key=lambda m: (len(result[m]), m))
        owner[tp] = member
        result[member].add(tp)
    _balance(result, candidates, owner)
    return result


def _balance(
    result: dict[str, set[TP]], candidates: dict[TP, list[str]], owner: dict[TP, str]
) -> None:
    """Move partitions from a member to a less loaded subscriber of them (load difference
    at least two) until none can move. Each move lowers the sum of squared loads, so this
    ends; for homogeneous subscriptions loads then differ by at most one."""
    moved = True
    while moved:
        moved = False
        for member in sorted(result, key=lambda m: (-len(result[m]), m)):
            load = len(result[member])
            best: tuple[int, str, TP] | None = None
            for tp in sorted(result[member], reverse=True):
                for other in candidates[tp]:
                    if len(result[other]) < load - 1 and (
                        best is None or (len(result[other]), other) < best[:2]
                    ):
                        best = (len(result[other]), other, tp)
            if best is not None:
                _, other, tp = best
                result[member].discard(tp)
                result[other].add(tp)
                owner[tp] = other
                moved = True
                break


def range_assignor(
    subscriptions: Mapping[str, Set[str]],
    partitions: Mapping[str, int],
    previous: Mapping[str, Set[TP]],
) -> dict[str, set[TP]]:
    """Kafka's ``range`` assignor (see the module docstring); ``previous`` is unused."""
    del previous
    result: dict[str, set[TP]] = {m: set() for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        per, extra = divmod(partitions[topic], len(members))
        start = 0
        for i, member in enumerate(members):
            count = per + (1 if i < extra else 0)
            result[member].update((topic, p) for p in range(start, start + count))
            start += count
    return result


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assignor, "range": range_assignor}
"""Assignor name -> function (the names ``group.consumer.assignors`` accepts)."""
