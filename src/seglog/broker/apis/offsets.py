"""Committed group offsets: OffsetCommit (API 8), OffsetFetch (API 9).

Commits from group members are checked against ``coordinator.groups.GroupCoordinator`` (member id,
generation), or for a KIP-848 consumer group against ``coordinator.consumer_groups`` (member
id, member epoch); consumers that assign partitions themselves commit with generation -1.
A share group's id has no committed offsets (Kafka's ``ShareGroup.validateOffsetCommit`` /
``validateOffsetFetch``): both answer 69 GROUP_ID_NOT_FOUND "Group G is not a consumer
group." (share groups' offsets are the share-partition start offsets:
DescribeShareGroupOffsets).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any

from kafka.protocol.consumer import OffsetCommitResponse, OffsetFetchResponse

from seglog.broker.apis.group_types import is_share_group
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.committed import MAX_RECORD_STRING_BYTES
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.errors import FENCED_INSTANCE_ID, INVALID_GROUP_ID
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import LogClosedError, SeglogError

__all__ = [
    "OFFSET_METADATA_MAX",
    "Codes",
    "Commits",
    "check_commits",
    "handle_offset_commit",
    "handle_offset_fetch",
]

OFFSET_METADATA_MAX = 4096
"""Kafka's default ``offset.metadata.max.bytes`` (compared, as Kafka does, with the
metadata string's length)."""


log = logging.getLogger(__name__)


Commits = dict[tuple[str, int], tuple[int, str | None]]
"""(topic, partition) -> (offset, metadata): the offsets a commit request may store."""
Codes = list[tuple[str, list[tuple[int, int]]]]
"""Per topic name, (partition, error code) in request order: the response's layout."""


def check_commits(
    ctx: BrokerContext, rctx: RequestContext, code: int, topics: Any
) -> tuple[Commits, Codes]:
    """The partitions of an OffsetCommit or TxnOffsetCommit request's ``topics`` checked:
    each one's error code is ``code`` (the request's own, e.g. the group's) unless it is 0
    NONE; else 29 TOPIC_AUTHORIZATION_FAILED without READ on the topic, the log's code (3
    for an unknown partition), 12 OFFSET_METADATA_TOO_LARGE for metadata longer than
    ``OFFSET_METADATA_MAX`` characters, or 0; the partitions at 0 are the commits."""
    commits: Commits = {}
    codes: Codes = []
    for t in topics:
        parts = []
        for p in t.partitions:
            c = _partition_code(ctx, rctx, code, t.name, p)
            if c == _errors.NONE:
                commits[(t.name, p.partition_index)] = (p.committed_offset, p.committed_metadata)
            parts.append((p.partition_index, c))
        codes.append((t.name, parts))
    return commits, codes


def _partition_code(ctx: BrokerContext, rctx: RequestContext, code: int, topic: str, p: Any) -> int:
    if code != _errors.NONE:
        return code
    if not rctx.allowed(Op.READ, Res.TOPIC, topic):
        return _errors.TOPIC_AUTHORIZATION_FAILED
    try:
        ctx.topics.log(topic, p.partition_index)
    except SeglogError as exc:
        return _errors.error_code(exc)
    if len(p.committed_metadata or "") > OFFSET_METADATA_MAX:
        return _errors.OFFSET_METADATA_TOO_LARGE
    return _errors.NONE


_OCTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_OCPartition = _OCTopic.OffsetCommitResponsePartition


def handle_offset_commit(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Store committed offsets. Unknown topic or partition: 3; empty group id: 24
    INVALID_GROUP_ID. Members of a group (``coordinator.groups``) must commit with their
    member id and the current generation (25 UNKNOWN_MEMBER_ID, 22 ILLEGAL_GENERATION,
    27 REBALANCE_IN_PROGRESS); generation -1 commits to a group without members are
    simple (assign-mode) commits. Members of a KIP-848 consumer group commit with their
    member epoch (Kafka's ``ConsumerGroup.validateOffsetCommit``: 25, 113
    STALE_MEMBER_EPOCH, 35 UNSUPPORTED_VERSION below v9). Metadata longer than Kafka's
    default ``offset.metadata.max.bytes`` (4096 characters, as Kafka counts them) is 12
    OFFSET_METADATA_TOO_LARGE for that partition, and a group id longer than the offsets
    log's int16 strings hold (32767 UTF-8 bytes, only sendable in flexible versions) is
    24 INVALID_GROUP_ID: what is stored always encodes to records that
    ``coordinator.committed`` decodes again."""
    version = rctx.api_version
    group_code = _errors.NONE
    if req.group_id and not rctx.allowed(Op.READ, Res.GROUP, req.group_id):
        group_code = _errors.GROUP_AUTHORIZATION_FAILED
    elif req.group_id and is_share_group(ctx, req.group_id):
        group_code = _errors.GROUP_ID_NOT_FOUND
    elif req.group_id and req.group_id in ctx.consumer_groups.groups:
        code = ctx.consumer_groups.validate_commit(
            req.group_id, req.member_id, req.generation_id_or_member_epoch, version
        )
        group_code = _errors.NONE if code is None else code
    elif req.group_id and ctx.groups.fenced(
        req.group_id, req.member_id, getattr(req, "group_instance_id", None)
    ):
        group_code = FENCED_INSTANCE_ID
    elif req.group_id:
        group_code = ctx.groups.validate_commit(
            req.group_id, req.generation_id_or_member_epoch, req.member_id
        )
    if not req.group_id or len(req.group_id.encode()) > MAX_RECORD_STRING_BYTES:
        group_code = INVALID_GROUP_ID
    commits, codes = check_commits(ctx, rctx, group_code, req.topics)
    topics = [
        _OCTopic(
            name=name,
            partitions=[_OCPartition(partition_index=i, error_code=c) for i, c in parts],
        )
        for name, parts in codes
    ]
    response = OffsetCommitResponse[version](throttle_time_ms=0, topics=topics)
    if not commits:
        return response
    try:
        durable = ctx.committed.commit(req.group_id, commits)
    except (SeglogError, OSError) as exc:
        log.error("cannot store committed offsets of group %r: %s", req.group_id, exc)
        return _failed(version, topics)
    if durable is None:
        return response
    return _when_durable(ctx, req.group_id, commits, durable, response, version, topics)


def _failed(version: int, topics: list[Any]) -> Any:
    """Every partition answered 15 COORDINATOR_NOT_AVAILABLE (retriable: the commit was
    not stored durably; the client retries it)."""
    failed = [
        _OCTopic(
            name=t.name,
            partitions=[
                _OCPartition(
                    partition_index=p.partition_index, error_code=_errors.COORDINATOR_NOT_AVAILABLE
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]
    return OffsetCommitResponse[version](throttle_time_ms=0, topics=failed)


async def _when_durable(  # noqa: PLR0917 (the commit and its answer)
    ctx: BrokerContext,
    group: str,
    commits: dict[tuple[str, int], tuple[int, str | None]],
    durable: Future[int],
    response: Any,
    version: int,
    topics: list[Any],
) -> Any:
    """The response once the commit's batch is fsynced (the default durability policy);
    only then does OffsetFetch see it."""
    try:
        await asyncio.wrap_future(durable)
    except LogClosedError as exc:
        log.error("committed offsets not durable: %s", exc)
        return _failed(version, topics)
    ctx.committed.apply(group, commits)
    return response


def _fetched(
    ctx: BrokerContext, group: str, topics: list[tuple[str, list[int]]] | None
) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    if topics is None:
        return [
            (t, [(p, off, meta) for p, (off, meta) in sorted(parts.items())])
            for t, parts in ctx.committed.partitions(group).items()
        ]
    out = []
    for name, partitions in topics:
        rows = []
        for p in partitions:
            found = ctx.committed.get(group, name, p)
            rows.append((p, -1, "") if found is None else (p, found[0], found[1]))
        out.append((name, rows))
    return out


_GTopic = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
_GPart = _GTopic.OffsetFetchResponsePartitions
_OFTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_OFPart = _OFTopic.OffsetFetchResponsePartition


def _fetched_topics(
    ctx: BrokerContext,
    group: str,
    topics: Any,
    topic_cls: Any,
    part_cls: Any,
    *,
    require_stable: bool = False,
) -> list[Any]:
    """The OffsetFetch response topics of ``group`` (``topics`` null: every commit), built
    with the schema classes of the response layout in use (per group in v8+, or flat).
    ``require_stable`` (v7+, KIP-447): a partition with transactional offsets not yet
    committed or aborted gets 88 UNSTABLE_OFFSET_COMMIT (the client retries)."""
    wanted = None if topics is None else [(t.name, t.partition_indexes) for t in topics]
    out = []
    for name, rows in _fetched(ctx, group, wanted):
        parts = []
        for p, off, meta in rows:
            unstable = require_stable and ctx.committed.has_pending(group, name, p)
            parts.append(
                part_cls(
                    partition_index=p,
                    committed_offset=-1 if unstable else off,
                    committed_leader_epoch=-1,
                    metadata=meta,
                    error_code=_errors.UNSTABLE_OFFSET_COMMIT if unstable else 0,
                )
            )
        out.append(topic_cls(name=name, partitions=parts))
    return out


def handle_offset_fetch(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Committed offsets; -1 (and empty metadata) where none is committed. v8+ answers per
    group; null topics mean every partition with a commit. v9+ requests naming a member of
    a KIP-848 consumer group are checked as Kafka's ``ConsumerGroup.validateOffsetFetch``
    (25 UNKNOWN_MEMBER_ID, 113 STALE_MEMBER_EPOCH for the group). A share group's id is
    69 GROUP_ID_NOT_FOUND (v2+: the request's or group's error; v0-1 have none: no
    topics)."""
    version = rctx.api_version
    resp = OffsetFetchResponse[version]
    if version >= 8:
        groups = []
        for g in req.groups:
            code = _errors.NONE
            if not rctx.allowed(Op.DESCRIBE, Res.GROUP, g.group_id):
                code = _errors.GROUP_AUTHORIZATION_FAILED
            elif is_share_group(ctx, g.group_id):
                code = _errors.GROUP_ID_NOT_FOUND
            elif version >= 9:
                code = ctx.consumer_groups.validate_fetch(g.group_id, g.member_id, g.member_epoch)
            topics = (
                _fetched_topics(
                    ctx, g.group_id, g.topics, _GTopic, _GPart, require_stable=req.require_stable
                )
                if code == _errors.NONE
                else []
            )
            groups.append(
                OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g.group_id, topics=topics, error_code=code
                )
            )
        return resp(throttle_time_ms=0, groups=groups)
    if not rctx.allowed(Op.DESCRIBE, Res.GROUP, req.group_id):
        return resp(throttle_time_ms=0, topics=[], error_code=_errors.GROUP_AUTHORIZATION_FAILED)
    if is_share_group(ctx, req.group_id):
        return resp(throttle_time_ms=0, topics=[], error_code=_errors.GROUP_ID_NOT_FOUND)
    stable = version >= 7 and bool(req.require_stable)
    topics = _fetched_topics(
        ctx, req.group_id, req.topics, _OFTopic, _OFPart, require_stable=stable
    )
    return resp(throttle_time_ms=0, topics=topics, error_code=0)
