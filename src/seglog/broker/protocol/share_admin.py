"""Share-group administration over the blocking wire client, for the CLI and the console:
confluent-kafka 2.16's AdminClient neither lists share groups (librdkafka's
ListConsumerGroups keeps only groups of protocol type "consumer" or "") nor describes
them (no ``describe_share_groups``), so these send Kafka's own requests.

- :func:`list_share_groups`: ListGroups v4 (Kafka 2.6+) to each broker given; the groups
  of protocol type ``share`` (Kafka 4.x lists share groups at every version), with their
  state (``Empty``, ``Stable``).
- :func:`describe_share_group`: FindCoordinator v1 (key type 0: share groups live on the
  group coordinator), then at the coordinator ShareGroupDescribe (77) v1 and
  DescribeShareGroupOffsets (90) v0 (KIP-932, Kafka 4.1+): state, epochs, assignor,
  members with their subscriptions and assignments, and the share-partition start offset
  of every partition the group has state in. None when the broker does not serve those
  APIs (ApiVersions) or the id is not a share group (69 GROUP_ID_NOT_FOUND).

Errors: :class:`ShareAdminError` (a Kafka error code the broker answered, with its
message); socket, TLS and SASL failures as ``KafkaConnection`` raises them.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from seglog.broker.protocol.client import (
    CLIENT_OPTIONS,
    ClientSecurity,
    KafkaConnection,
    client_supports,
)
from seglog.broker.protocol.messages.share_group import (
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
)

with warnings.catch_warnings():  # kafka-python's first import warns (importlib.resources)
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin import ListGroupsRequest
    from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest

__all__ = [
    "ShareAdminError",
    "ShareGroupInfo",
    "ShareMemberInfo",
    "describe_share_group",
    "list_share_groups",
    "wire_security",
]

GROUP_ID_NOT_FOUND = 69
_SHARE_GROUP_DESCRIBE, _DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90


class ShareAdminError(Exception):
    """The broker answered with a Kafka error code (``code``)."""

    def __init__(self, code: int, message: str | None, what: str) -> None:
        super().__init__(f"{what}: Kafka error {code}" + (f": {message}" if message else ""))
        self.code = code


@dataclasses.dataclass(frozen=True)
class ShareMemberInfo:
    """One member of a share group (ShareGroupDescribe)."""

    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    rack_id: str | None
    subscribed_topics: list[str]
    assignment: list[tuple[str, int]]
    """(topic, partition), sorted."""


@dataclasses.dataclass(frozen=True)
class ShareGroupInfo:
    """A described share group; ``start_offsets``: (topic, partition) -> share-partition
    start offset (the lowest offset not yet settled: acknowledged, rejected or archived)
    of every partition the group has state in."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator: int
    members: list[ShareMemberInfo]
    start_offsets: dict[tuple[str, int], int]


def wire_security(conf: Mapping[str, object]) -> ClientSecurity | None:
    """The wire client's TLS/SASL settings for a librdkafka configuration, or None when
    the client cannot connect as it says (a mechanism or key store it does not speak).
    Only the connection's options count (``bootstrap.servers``, ``client.id``,
    ``security.*``, ``sasl.*``, ``ssl.*``); the others (``log_level``, timeouts...) are
    librdkafka's business. Raises what ``ClientSecurity`` raises."""
    wire = {
        k: str(v)
        for k, v in conf.items()
        if k in CLIENT_OPTIONS or k.startswith(("security.", "sasl.", "ssl."))
    }
    return ClientSecurity(wire) if client_supports(wire) else None


def list_share_groups(
    brokers: Iterable[tuple[str, int]],
    *,
    client_id: str = "seglog-admin",
    timeout_s: float = 30.0,
    security: ClientSecurity | None = None,
) -> dict[str, str]:
    """group id -> state (Kafka's ``ShareGroupState`` name) of the share groups of every
    broker in ``brokers`` (host, port). Raises ShareAdminError for a ListGroups error."""
    out: dict[str, str] = {}
    for host, port in brokers:
        with KafkaConnection(host, port, client_id, timeout_s, security) as conn:
            resp = conn.call(ListGroupsRequest[4](states_filter=[]))
        if resp.error_code:
            raise ShareAdminError(resp.error_code, None, f"ListGroups at {host}:{port}")
        for g in resp.groups:
            if g.protocol_type == "share":
                out[g.group_id] = g.group_state
    return out


def _serves(conn: KafkaConnection, wanted: dict[int, int]) -> bool:
    """Whether the broker serves each api key at the given version (ApiVersions v0)."""
    resp = conn.call(ApiVersionsRequest[0]())
    ranges = {k: (lo, hi) for k, lo, hi in resp.api_keys}
    return all(k in ranges and ranges[k][0] <= v <= ranges[k][1] for k, v in wanted.items())


def describe_share_group(
    bootstrap: tuple[str, int],
    group: str,
    *,
    client_id: str = "seglog-admin",
    timeout_s: float = 30.0,
    security: ClientSecurity | None = None,
) -> ShareGroupInfo | None:
    """``group`` described at its coordinator (found through ``bootstrap``), or None when
    it is not a share group or the broker has no share groups. Raises ShareAdminError."""
    host, port = bootstrap
    with KafkaConnection(host, port, client_id, timeout_s, security) as conn:
        found = conn.call(FindCoordinatorRequest[1](key=group, key_type=0))
    if found.error_code:
        raise ShareAdminError(found.error_code, found.error_message, "FindCoordinator")
    with KafkaConnection(found.host, found.port, client_id, timeout_s, security) as conn:
        if not _serves(conn, {_SHARE_GROUP_DESCRIBE: 1, _DESCRIBE_SHARE_GROUP_OFFSETS: 0}):
            return None
        resp = conn.call(
            ShareGroupDescribeRequest[1](group_ids=[group], include_authorized_operations=False)
        )
        g = resp.groups[0]
        if g.error_code == GROUP_ID_NOT_FOUND:
            return None
        if g.error_code:
            raise ShareAdminError(g.error_code, g.error_message, "ShareGroupDescribe")
        starts = _start_offsets(conn, group)
    members = [
        ShareMemberInfo(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_epoch=m.member_epoch,
            rack_id=m.rack_id,
            subscribed_topics=sorted(m.subscribed_topic_names or []),
            assignment=sorted(
                (tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions
            ),
        )
        for m in g.members
    ]
    return ShareGroupInfo(
        group_id=group,
        state=g.group_state,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor=g.assignor_name,
        coordinator=found.node_id,
        members=sorted(members, key=lambda m: m.member_id),
        start_offsets=starts,
    )


def _start_offsets(conn: KafkaConnection, group: str) -> dict[tuple[str, int], int]:
    """DescribeShareGroupOffsets v0 with null topics: every partition with state."""
    req: Any = DescribeShareGroupOffsetsRequest[0]
    asked = req.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
    resp = conn.call(req(groups=[asked]))
    g = resp.groups[0]
    if g.error_code == GROUP_ID_NOT_FOUND:
        return {}  # deleted between the two requests
    if g.error_code:
        raise ShareAdminError(g.error_code, g.error_message, "DescribeShareGroupOffsets")
    out = {}
    for t in g.topics:
        for p in t.partitions:
            if p.error_code == 0 and p.start_offset >= 0:
                out[(t.topic_name, p.partition_index)] = p.start_offset
    return out
