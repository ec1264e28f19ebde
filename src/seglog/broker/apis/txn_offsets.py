"""TxnOffsetCommit (API 28): a transactional producer's offsets for a group, visible to
the group only when its transaction commits (KIP-98, KIP-447). They are stored at once
as pending records in ``__consumer_offsets`` (``CommittedOffsets.commit_pending``: they
survive a restart) and applied or dropped when the transaction ends."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka.protocol.producer import TxnOffsetCommitResponse

from seglog.broker.apis.offsets import Codes, check_commits
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.committed import MAX_RECORD_STRING_BYTES
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = ["handle_txn_offset_commit"]

log = logging.getLogger(__name__)

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = _Topic.TxnOffsetCommitResponsePartition


def _answer(version: int, codes: Codes) -> Any:
    topics = [
        _Topic(
            name=name,
            partitions=[_Partition(partition_index=p, error_code=c) for p, c in parts],
        )
        for name, parts in codes
    ]
    return TxnOffsetCommitResponse[version](throttle_time_ms=0, topics=topics)


def _request_code(ctx: BrokerContext, rctx: RequestContext, req: Any) -> int:
    if not rctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        return _errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not rctx.allowed(Op.READ, Res.GROUP, req.group_id):
        return _errors.GROUP_AUTHORIZATION_FAILED
    if not req.group_id or len(req.group_id.encode()) > MAX_RECORD_STRING_BYTES:
        return _errors.INVALID_GROUP_ID
    code = ctx.transactions.check_offsets_commit(
        req.transactional_id, req.producer_id, req.producer_epoch
    )
    member = req.member_id if rctx.api_version >= 3 else ""
    generation = req.generation_id if rctx.api_version >= 3 else -1
    member_commit = member or generation >= 0  # KIP-447: sent by a group member
    if code == _errors.NONE and member_commit and req.group_id not in ctx.consumer_groups.groups:
        code = ctx.groups.validate_commit(req.group_id, generation, member)
    return code


def handle_txn_offset_commit(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Per-partition codes: 53 without WRITE on the transactional id, 30 without READ on
    the group, 24 for an empty group id, the coordinator's 49/47/48 (another producer, an
    older epoch, no AddOffsetsToTxn in this transaction); then 29 for a topic without READ,
    3 for an unknown partition, 12 for metadata over 4096 characters; 15 when the pending
    offsets could not be stored. (KIP-447's generation and member id, v3+, are accepted as
    sent by a member of a KIP-848 group; for a classic group they are checked as
    OffsetCommit's: 25 UNKNOWN_MEMBER_ID, 22 ILLEGAL_GENERATION.)"""
    version = rctx.api_version
    code = _request_code(ctx, rctx, req)
    offsets, codes = check_commits(ctx, rctx, code, req.topics)
    if not offsets:
        return _answer(version, codes)

    def failed() -> Any:
        return _answer(
            version,
            [(n, [(p, _errors.COORDINATOR_NOT_AVAILABLE) for p, _c in ps]) for n, ps in codes],
        )

    try:
        durable = ctx.committed.commit_pending(req.producer_id, req.group_id, offsets)
    except (SeglogError, OSError, ValueError) as exc:
        log.error("cannot store transactional offsets of group %r: %s", req.group_id, exc)
        return failed()
    barrier = ctx.transactions.ongoing_barrier(req.producer_id)
    if durable is None and barrier is None:
        return _answer(version, codes)

    async def when_durable() -> Any:
        try:
            if durable is not None:
                await asyncio.wrap_future(durable)
            if barrier is not None:  # the AddOffsetsToTxn record (ongoing_barrier)
                state_log, end = barrier
                await asyncio.wrap_future(state_log.sync_future(end))
        except (SeglogError, OSError) as exc:
            log.error("transactional offsets not durable: %s", exc)
            return failed()
        return _answer(version, codes)

    return when_durable()
