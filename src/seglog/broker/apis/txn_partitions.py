"""AddPartitionsToTxn (API 24, v0-5 with the batched v4+ form and KIP-890's verifyOnly)
and AddOffsetsToTxn (API 25): what a transactional producer adds to its transaction
before writing to it (``coordinator/transactions.py``)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import AddOffsetsToTxnResponse, AddPartitionsToTxnResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.log.internal_topics import INTERNAL_TOPICS, OFFSETS_TOPIC
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res

__all__ = ["handle_add_offsets_to_txn", "handle_add_partitions_to_txn"]

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult
_TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult

Topics = list[tuple[str, list[int]]]


def _results(topics: Topics, codes: dict[tuple[str, int], int]) -> list[Any]:
    return [
        _TopicResult(
            name=name,
            results_by_partition=[
                _PartitionResult(partition_index=p, partition_error_code=codes[(name, p)])
                for p in parts
            ],
        )
        for name, parts in topics
    ]


async def _one(
    ctx: BrokerContext,
    rctx: RequestContext,
    txn: tuple[str, int, int, bool],
    topics: Topics,
    version: int,
) -> dict[tuple[str, int], int]:
    """Per-partition codes for one transaction (Kafka's ``handleAddPartitionsToTxnRequest``
    order): 53 without WRITE on the transactional id; 29 for a topic without WRITE and 3
    for an unknown partition, the others then 55 OPERATION_NOT_ATTEMPTED; else the
    coordinator's code for all."""
    txn_id, pid, epoch, verify_only = txn
    wanted = [(name, p) for name, parts in topics for p in parts]
    if not rctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
        return dict.fromkeys(wanted, _errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    bad: dict[tuple[str, int], int] = {}
    for name, p in wanted:
        if not rctx.allowed(Op.WRITE, Res.TOPIC, name):
            bad[(name, p)] = _errors.TOPIC_AUTHORIZATION_FAILED
        elif name in INTERNAL_TOPICS:  # written by the coordinators only
            bad[(name, p)] = _errors.INVALID_TOPIC_EXCEPTION
        else:
            info = ctx.topics.get(name)
            if info is None or not 0 <= p < info.partitions:
                bad[(name, p)] = _errors.UNKNOWN_TOPIC_OR_PARTITION
    if bad:
        return {k: bad.get(k, _errors.OPERATION_NOT_ATTEMPTED) for k in wanted}
    code = await ctx.transactions.add_partitions(
        txn_id, pid, epoch, wanted, version, verify_only=verify_only
    )
    return dict.fromkeys(wanted, code)


def handle_add_partitions_to_txn(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """v0-3: one transaction from its producer; v4+: a batch of transactions (Kafka's
    broker-to-coordinator form, KIP-890), which needs CLUSTER_ACTION on the cluster (31 in
    the top-level error code)."""
    version = rctx.api_version
    resp = AddPartitionsToTxnResponse[version]
    if version < 4:
        topics = [(t.name, list(t.partitions)) for t in req.v3_and_below_topics]
        txn = (
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            False,
        )

        async def single() -> Any:
            codes = await _one(ctx, rctx, txn, topics, version)
            return resp(throttle_time_ms=0, results_by_topic_v3_and_below=_results(topics, codes))

        return single()
    if not rctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0,
            error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[],
        )

    async def batched() -> Any:
        results = []
        for t in req.transactions:
            topics = [(tp.name, list(tp.partitions)) for tp in t.topics]
            txn = (t.transactional_id, t.producer_id, t.producer_epoch, bool(t.verify_only))
            codes = await _one(ctx, rctx, txn, topics, version)
            results.append(
                _TxnResult(
                    transactional_id=t.transactional_id, topic_results=_results(topics, codes)
                )
            )
        return resp(throttle_time_ms=0, error_code=0, results_by_transaction=results)

    return batched()


def handle_add_offsets_to_txn(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Add the group's offsets partition to the transaction (TxnOffsetCommit may follow):
    53 without WRITE on the transactional id, 30 without READ on the group, else the
    coordinator's code (:meth:`TransactionCoordinator.add_partitions`)."""
    version = rctx.api_version
    resp = AddOffsetsToTxnResponse[version]
    if not rctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        return resp(throttle_time_ms=0, error_code=_errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not rctx.allowed(Op.READ, Res.GROUP, req.group_id):
        return resp(throttle_time_ms=0, error_code=_errors.GROUP_AUTHORIZATION_FAILED)

    async def add() -> Any:
        code = await ctx.transactions.add_partitions(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            [(OFFSETS_TOPIC, 0)],
            version,
        )
        return resp(throttle_time_ms=0, error_code=code)

    return add()
